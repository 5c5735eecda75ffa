//! Syntax highlighting for the code viewer: highlight.js's core and, per file, the one grammar
//! its extension names, each grammar a chunk of its own. The viewer imports this module
//! dynamically, so none of it is in the first load. highlight.js escapes the text and marks
//! tokens with `hljs-*` classes only (no inline style), which the CSP allows; their colours are
//! in code-theme.css, which follows the page's light or dark scheme.
import hljs from "highlight.js/lib/core";
import type { LanguageFn } from "highlight.js";
import "./code-theme.css";
import { grammarOf } from "./viewers";

/** Larger texts are shown plain: highlighting them would hold up the page. */
export const MAX_HIGHLIGHT = 512 * 1024;

type Grammar = () => Promise<{ default: LanguageFn }>;

const GRAMMARS: Record<string, Grammar> = {
  rust: () => import("highlight.js/lib/languages/rust"),
  typescript: () => import("highlight.js/lib/languages/typescript"),
  javascript: () => import("highlight.js/lib/languages/javascript"),
  python: () => import("highlight.js/lib/languages/python"),
  go: () => import("highlight.js/lib/languages/go"),
  java: () => import("highlight.js/lib/languages/java"),
  kotlin: () => import("highlight.js/lib/languages/kotlin"),
  c: () => import("highlight.js/lib/languages/c"),
  cpp: () => import("highlight.js/lib/languages/cpp"),
  csharp: () => import("highlight.js/lib/languages/csharp"),
  bash: () => import("highlight.js/lib/languages/bash"),
  json: () => import("highlight.js/lib/languages/json"),
  yaml: () => import("highlight.js/lib/languages/yaml"),
  ini: () => import("highlight.js/lib/languages/ini"),
  xml: () => import("highlight.js/lib/languages/xml"),
  css: () => import("highlight.js/lib/languages/css"),
  scss: () => import("highlight.js/lib/languages/scss"),
  sql: () => import("highlight.js/lib/languages/sql"),
  markdown: () => import("highlight.js/lib/languages/markdown"),
  ruby: () => import("highlight.js/lib/languages/ruby"),
  php: () => import("highlight.js/lib/languages/php"),
  lua: () => import("highlight.js/lib/languages/lua"),
  swift: () => import("highlight.js/lib/languages/swift"),
  diff: () => import("highlight.js/lib/languages/diff"),
};

/** The grammars a page in a grammar embeds (HTML's styles and scripts, a Svelte file's). */
const EMBEDDED: Record<string, string[]> = { xml: ["css", "javascript"] };

async function register(name: string): Promise<void> {
  if (hljs.getLanguage(name)) return;
  const { default: grammar } = await GRAMMARS[name]();
  hljs.registerLanguage(name, grammar);
}

/**
 * The text as highlighted HTML (escaped, with `hljs-*` spans), or null when its extension names
 * no grammar or it is larger than MAX_HIGHLIGHT.
 */
export async function highlight(text: string, ext: string): Promise<string | null> {
  const name = grammarOf(ext);
  if (!name || text.length > MAX_HIGHLIGHT) return null;
  await Promise.all([name, ...(EMBEDDED[name] ?? [])].map(register));
  return hljs.highlight(text, { language: name, ignoreIllegals: true }).value;
}
