import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { projectRoot } from '../../src/contract/paths.js';
import type { Job } from './pool.js';

/** What `npm run format:check` reads, as `npm run lint` does: the folders its script names (package.json). */
function checkedFolders(): string[] {
  const { scripts } = JSON.parse(readFileSync(join(projectRoot, 'package.json'), 'utf8')) as {
    scripts: Record<string, string>;
  };
  return (scripts['format:check'] ?? '').split(/\s+/).filter((word) => existsSync(join(projectRoot, word)));
}

/** The files ESLint takes (eslint.config.js); Prettier takes the rest it knows too. */
const LINTED = /\.[cm]?[jt]s$/;

const git = (...args: string[]) =>
  execFileSync('git', args, { cwd: projectRoot, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] })
    .split('\n')
    .filter((line) => line !== '');

/**
 * The files lint and format:check read that differ from the last commit, edited or new (as git
 * sees them: ignored files are not); undefined outside a git checkout or before its first commit.
 */
export function changedSinceCommit(): string[] | undefined {
  try {
    const folders = checkedFolders();
    const changed = [
      ...git('diff', '--name-only', '--diff-filter=d', 'HEAD', '--', ...folders),
      ...git('ls-files', '--others', '--exclude-standard', '--', ...folders),
    ];
    return [...new Set(changed)].sort();
  } catch {
    return undefined;
  }
}

const bin = (...path: string[]) => join(projectRoot, 'node_modules', ...path);

/** A job that only says why it has nothing to do. */
const nothingToDo = (group: string, why: string) => ({
  group,
  name: `${group} (${why})`,
  program: process.execPath,
  args: ['-e', `console.log(${JSON.stringify(why)})`],
});

/**
 * lint and format:check of the changed files alone, for the fast subset (`npm test -- <files>`):
 * ESLint and Prettier as package.json runs them, and git's whitespace check of the changes. The
 * whole `npm test` checks every file (a change can make another file's lint fail through its types).
 */
export function changedFileChecks(changed: string[]): (Job & { group: string })[] {
  const linted = changed.filter((file) => LINTED.test(file));
  const counted = (files: string[]) =>
    `${files.length} file${files.length === 1 ? '' : 's'} changed since the last commit`;
  return [
    linted.length === 0
      ? nothingToDo('lint', 'no file to lint changed since the last commit')
      : {
          group: 'lint',
          name: `lint (${counted(linted)})`,
          program: process.execPath,
          args: [bin('eslint', 'bin', 'eslint.js'), '--no-warn-ignored', ...linted],
        },
    { group: 'lint', name: 'lint (whitespace of the changes)', program: 'git', args: ['diff', '--check', 'HEAD'] },
    changed.length === 0
      ? nothingToDo('format:check', 'no file to check changed since the last commit')
      : {
          group: 'format:check',
          name: `format:check (${counted(changed)})`,
          program: process.execPath,
          args: [bin('prettier', 'bin', 'prettier.cjs'), '--check', '--ignore-unknown', ...changed],
        },
  ];
}
