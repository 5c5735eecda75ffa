//! The activity log's action names (as the API spells them) and their labels.
import type { Schemas } from "./api/client";
import { t, type MessageKey } from "./i18n/index.svelte";

export type Action = Schemas["Action"];

/** Every action, in the order the filters list them. */
export const ACTIONS: Action[] = [
  "user.sign_in", "user.sign_in_failed", "user.register", "user.password_change", "user.settings_update",
  "file.upload", "file.write", "folder.create", "object.rename", "object.move", "object.copy", "object.trash", "object.restore", "object.delete",
  "share.create", "share.update", "share.delete", "redeem.use",
  "admin.user_create", "admin.user_update", "admin.ban", "admin.user_delete", "admin.settings_update",
  "admin.group_create", "admin.group_update", "admin.group_delete",
  "admin.policy_create", "admin.policy_update", "admin.policy_delete",
  "admin.report_decision", "admin.share_delete",
];

/** The actions a user's own log can hold (administrators' ones only appear for administrators). */
export const OWN_ACTIONS: Action[] = ACTIONS.filter((a) => !a.startsWith("admin."));

/** The label of `action`; an action this app does not know shows as its name. */
export function actionLabel(action: string): string {
  const key = `settings.activity.actions.${action.replace(".", "_")}` as MessageKey;
  const label = t(key);
  return label === key ? action : label;
}
