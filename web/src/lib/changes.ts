//! The signed-in user's tree changes, live (`GET /events`, Server-Sent Events): the file browser
//! refreshes a folder another device or tab changed. A browser's EventSource sends no header, so
//! the access token goes in the query; after an error the feed reconnects with a fresh token from
//! the last cursor (nothing missed), and starts over from now when that keeps failing (the
//! cursor is too old, `410`), telling listeners to look again.
import { session } from "./session.svelte";
import type { Schemas } from "./api/client";

export type Change = Schemas["ChangeEvent"];
type Listener = (change: Change | null) => void;

const RETRY_MS = 2000;
/** Failed reconnects with a cursor before starting over without it. */
const MAX_RESUMES = 3;

class ChangeFeed {
  private source: EventSource | null = null;
  private listeners = new Set<Listener>();
  private cursor: number | null = null;
  private failures = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;

  /** Calls `listener` with each change (and `null` when changes may have been missed); answers
   * the function that stops it. The feed runs while anyone listens. */
  listen(listener: Listener): () => void {
    this.listeners.add(listener);
    if (!this.source && !this.timer) void this.open();
    return () => {
      this.listeners.delete(listener);
      if (!this.listeners.size) this.close();
    };
  }

  private close(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.source?.close();
    this.source = null;
  }

  private async open(): Promise<void> {
    this.timer = undefined;
    await session.ensureFresh().catch(() => undefined);
    const token = session.accessToken;
    if (!token || !this.listeners.size) return;
    const query = new URLSearchParams({ access_token: token });
    if (this.cursor !== null) query.set("since", String(this.cursor));
    const source = new EventSource(`/api/v1/events?${query}`);
    this.source = source;
    source.addEventListener("ready", (e) => {
      this.failures = 0;
      this.cursor = JSON.parse((e as MessageEvent).data).cursor;
    });
    source.addEventListener("change", (e) => {
      const change = JSON.parse((e as MessageEvent).data) as Change;
      this.cursor = change.cursor;
      for (const listener of this.listeners) listener(change);
    });
    source.onerror = () => {
      source.close();
      if (this.source !== source) return;
      this.source = null;
      this.failures++;
      if (this.failures > MAX_RESUMES && this.cursor !== null) {
        this.cursor = null;
        for (const listener of this.listeners) listener(null);
      }
      this.timer = setTimeout(() => void this.open(), RETRY_MS);
    };
  }
}

export const changes = new ChangeFeed();
