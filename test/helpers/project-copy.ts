import {
  cpSync,
  existsSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { projectRoot } from '../../src/contract/paths.js';
import type { Teardown } from './backend.js';

/**
 * What the project is made of: everything but node_modules, data and test output, with the
 * configuration lint, format:check and git read (a test runs the fast `npm test -- …` in a copy).
 */
const PROJECT_ENTRIES = [
  'dist',
  'generated',
  'clients',
  'contracts',
  'scripts',
  'src',
  'test',
  'openapi.yaml',
  'redocly.yaml',
  '.redocly.lint-ignore.yaml',
  'package.json',
  'tsconfig.json',
  'eslint.config.js',
  '.prettierrc.json',
  '.prettierignore',
  '.gitignore',
];

/** The contract and what its tools read besides: Redocly's ruleset and exemptions, the releases. */
const CONTRACT_ENTRIES = ['contracts', 'openapi.yaml', 'redocly.yaml', '.redocly.lint-ignore.yaml', 'package.json'];

/** Written by the suites while they run (scripts/test.ts): not part of the build. */
const TEST_OUTPUT = new Set([join(projectRoot, 'dist', 'test-responses.log')]);

/**
 * A copy of the project in a temporary folder, removed at teardown, as a clone is once `npm ci`
 * has built it: node_modules linked to this project's, and this build's dist/ with TypeScript's
 * record of it (dist/.tsbuildinfo), so that a `tsc -b tsconfig.json` in the copy checks only what
 * the test changed there, as it would in the project itself, rather than the whole program again.
 */
export function copyProject(t: Teardown): string {
  const copy = copyOf(t, PROJECT_ENTRIES);
  rebaseBuildInfo(copy);
  return copy;
}

/**
 * A copy of the contract alone (with node_modules linked), for a check that reads nothing else:
 * Redocly's lint and diff, the releases, the served document. A tenth of a whole copy's cost.
 */
export function copyContract(t: Teardown): string {
  return copyOf(t, CONTRACT_ENTRIES);
}

function copyOf(t: Teardown, entries: string[]): string {
  const copy = mkdtempSync(join(tmpdir(), 'petstore-copy-'));
  t.teardown(() => rmSync(copy, { recursive: true, force: true }));
  for (const entry of entries.filter((name) => existsSync(join(projectRoot, name)))) {
    cpSync(join(projectRoot, entry), join(copy, entry), { recursive: true, filter: (from) => !TEST_OUTPUT.has(from) });
  }
  symlinkSync(join(projectRoot, 'node_modules'), join(copy, 'node_modules'), 'dir');
  return copy;
}

/**
 * tsc records the files it read from node_modules by their real path, relative to dist/. From the
 * copy, whose node_modules is a link, that path is another: rewritten here, or tsc takes every one
 * of them for a new file and checks the whole program again. Nothing else in the record names a
 * place outside the project. (A record tsc cannot use costs a full check, never a wrong one.)
 */
function rebaseBuildInfo(copy: string): void {
  const file = join(copy, 'dist', '.tsbuildinfo');
  if (!existsSync(file)) return;
  const modules = realpathSync(join(projectRoot, 'node_modules'));
  const from = `${relative(join(projectRoot, 'dist'), modules)}/`;
  const to = `${relative(join(copy, 'dist'), modules)}/`;
  const info = JSON.parse(readFileSync(file, 'utf8')) as { fileNames?: unknown };
  if (!Array.isArray(info.fileNames)) return;
  info.fileNames = info.fileNames.map((name: unknown) =>
    typeof name === 'string' && name.startsWith(from) ? `${to}${name.slice(from.length)}` : name,
  );
  writeFileSync(file, JSON.stringify(info));
}
