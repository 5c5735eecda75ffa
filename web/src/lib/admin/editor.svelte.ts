//! One administration form that creates an item or edits one: which item is open ("new" for a
//! creation), the form's fields, the last error and whether a save is on its way, with the moves
//! the screen makes (open, close, submit). The screen supplies the fields and the request.

export type EditorOptions<Item, Form> = {
  /** The fields of a new item. */
  blank: () => Form;
  /** The fields of an existing item (screens that only create leave it out). */
  from?: (item: Item) => Form;
  /** Sends the form (`item` is null for a new one); a thrown error's message is shown. */
  save: (form: Form, item: Item | null) => Promise<void>;
  /** Runs after a successful save, once the form is closed (typically: read the list again). */
  saved?: () => unknown;
  /** Runs whenever the form is closed or reset. */
  closed?: () => void;
  /** The form is always on the page: closing it starts a new item instead of hiding it. */
  alwaysOpen?: boolean;
  /** A successful save leaves the form as it is (a batch form sent again with small changes). */
  keepAfterSave?: boolean;
};

export class Editor<Item, Form> {
  editing = $state.raw<Item | "new" | null>(null);
  form = $state<Form | null>(null);
  error = $state<string | null>(null);
  busy = $state(false);
  readonly #options: EditorOptions<Item, Form>;

  constructor(options: EditorOptions<Item, Form>) {
    this.#options = options;
    if (options.alwaysOpen) this.open("new");
  }

  /** The existing item being edited; null while creating one or closed. */
  get item(): Item | null {
    return this.editing === "new" ? null : this.editing;
  }

  get isNew(): boolean {
    return this.editing === "new";
  }

  open(item: Item | "new"): void {
    this.editing = item;
    this.error = null;
    if (item !== "new" && !this.#options.from) throw new Error("this editor only creates");
    this.form = item === "new" ? this.#options.blank() : this.#options.from!(item);
  }

  close(): void {
    if (this.#options.alwaysOpen) this.open("new");
    else {
      this.editing = null;
      this.form = null;
    }
    this.#options.closed?.();
  }

  /** The form's `onsubmit`: sends it, then closes it (unless kept) and runs `saved`. */
  submit = async (e?: SubmitEvent): Promise<void> => {
    e?.preventDefault();
    const { form, editing } = this;
    if (!form || !editing) return;
    this.error = null;
    this.busy = true;
    try {
      await this.#options.save(form, editing === "new" ? null : editing);
      if (!this.#options.keepAfterSave) this.close();
      await this.#options.saved?.();
    } catch (err) {
      this.error = (err as Error).message;
    } finally {
      this.busy = false;
    }
  };
}
