//! Dragging entries of the file browser onto a folder (a row, a tile, a breadcrumb): what is
//! being dragged (kept here, as a page's drag never leaves it), whether a folder may take it,
//! and whether the drop copies (Ctrl, or Alt as macOS has it) instead of moving.
import type { ObjectView } from "../api/client";

/** The drag's data type, so the upload drop zone (which wants "Files") ignores it. */
export const DRAG_TYPE = "application/x-nubo-objects";

let dragged: ObjectView[] | null = null;

export const drag = {
  get list(): ObjectView[] | null {
    return dragged;
  },
  start(list: ObjectView[], data: DataTransfer): void {
    dragged = list;
    data.effectAllowed = "copyMove";
    data.setData(DRAG_TYPE, list.map((o) => o.id).join(","));
    data.setData("text/plain", list.map((o) => o.name).join("\n"));
  },
  end(): void {
    dragged = null;
  },
};

export function parentPath(path: string): string {
  const i = path.lastIndexOf("/");
  return i > 0 ? path.slice(0, i) : "/";
}

/**
 * Whether the folder at `dst` (its path) can take `list`: "self" when it is one of them or
 * inside one of them (refused, with a message), "same" when they are all in it already (not
 * a target at all), null when it can.
 */
export function refusal(list: readonly ObjectView[], dst: string): "self" | "same" | null {
  if (list.some((o) => o.kind === "folder" && (dst === o.path || dst.startsWith(o.path === "/" ? "/" : o.path + "/")))) {
    return "self";
  }
  return list.every((o) => parentPath(o.path) === dst) ? "same" : null;
}

/** The drop copies when Ctrl (or Alt, macOS's copy key) is held. */
export function copies(e: DragEvent): boolean {
  return e.ctrlKey || e.altKey;
}
