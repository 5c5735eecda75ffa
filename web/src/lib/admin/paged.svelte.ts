//! One page of an administration list (`{count, items}` answers read with `offset`/`limit`):
//! the rows shown, the total, where the page starts and the last error, with the moves the
//! pager makes. The screen supplies the request, so its filters are read at each load.

/** The answer of a paged administration endpoint. */
export type Page<T> = { count: number; items: T[] };

/** Asks for the page of `limit` rows starting at row `offset`. */
export type FetchPage<T> = (offset: number, limit: number) => Promise<Page<T>>;

export class Paged<T> {
  items = $state.raw<T[]>([]);
  count = $state(0);
  offset = $state(0);
  error = $state<string | null>(null);
  readonly #fetchPage: FetchPage<T>;
  /** Counts the loads begun: only the newest one's answer is shown (an older one may arrive last). */
  #loads = 0;
  readonly pageSize: number;

  constructor(fetchPage: FetchPage<T>, pageSize = 50) {
    this.#fetchPage = fetchPage;
    this.pageSize = pageSize;
  }

  /** Reads the current page again; a failure is kept in `error`. When a filter changes while an
   * earlier load is still on its way, the earlier answer is dropped whenever it arrives. */
  async load(): Promise<void> {
    const load = ++this.#loads;
    this.error = null;
    try {
      const page = await this.#fetchPage(this.offset, this.pageSize);
      if (load !== this.#loads) return;
      this.items = page.items;
      this.count = page.count;
    } catch (e) {
      if (load === this.#loads) this.error = (e as Error).message;
    }
  }

  /** Back to the first page (after a filter changed) and reads it. */
  reset(): Promise<void> {
    this.offset = 0;
    return this.load();
  }

  previous(): Promise<void> {
    this.offset = Math.max(0, this.offset - this.pageSize);
    return this.load();
  }

  next(): Promise<void> {
    this.offset += this.pageSize;
    return this.load();
  }

  get isFirst(): boolean {
    return this.offset === 0;
  }

  get isLast(): boolean {
    return this.offset + this.items.length >= this.count;
  }
}
