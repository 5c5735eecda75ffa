// Svelte compiler options: component CSS is emitted to .css files (never injected <style>),
// which the strict CSP (style-src 'self') requires.
export default {
  compilerOptions: { css: "external" },
};
