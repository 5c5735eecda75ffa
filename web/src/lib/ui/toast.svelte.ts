//! The app's one transient message ("Moved to the trash", with Undo): a page says what it did
//! and, optionally, how to take it back; `Toast.svelte` (in the shell) shows it in a polite
//! live region and lets it go after a while. A new message replaces the one shown.

export interface ToastAction {
  label: string;
  run: () => unknown;
}
export interface ToastMessage {
  id: number;
  text: string;
  action?: ToastAction;
}

/** How long a message stays (the pointer or the focus on it holds it). */
export const TOAST_MS = 8000;

class Toasts {
  current = $state.raw<ToastMessage | null>(null);
  #next = 1;

  show(text: string, action?: ToastAction): void {
    this.current = { id: this.#next++, text, action };
  }
  dismiss(id?: number): void {
    if (id === undefined || this.current?.id === id) this.current = null;
  }
}

export const toast = new Toasts();
