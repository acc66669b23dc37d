import {
  copyFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ClientContract } from '../contract/client-description.js';
import { clientGeneratedDir, generateClient, pythonGeneratedDir } from '../contract/generate-client.js';
import { GENERATE_CONFIG } from '../contract/generate-types.js';
import { RELEASES_DIR } from '../../src/versions/releases.js';
import { type Drift, files } from './drift.js';
import { run } from './tools.js';

const FIX = { run: 'npm run generate' };
const SHOWN_LINES = 6;
/** Lines that must agree again for a hunk to end; and how far to look for them. */
const RESYNC_LINES = 3;
const SEARCH_LINES = 400;

/** The fewest lines to drop from each text, after `start`, for the two to agree again. */
function hunkSize(start: number, agree: (i: number, j: number) => boolean): [number, number] | undefined {
  for (let distance = 1; distance <= 2 * SEARCH_LINES; distance++) {
    for (let removed = 0; removed <= distance; removed++) {
      if (agree(start + removed, start + distance - removed)) return [removed, distance - removed];
    }
  }
  return undefined;
}

/**
 * The first hunk where two texts differ, as `-` (before) and `+` (after) lines, and the 1-based line
 * of `before` it starts at: the fewest lines removed and added for both to agree again.
 */
export function firstDifference(before: string, after: string): { line: number; lines: string[] } {
  const a = before.split('\n');
  const b = after.split('\n');
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start++;
  const agree = (i: number, j: number) => {
    for (let k = 0; k < RESYNC_LINES; k++) {
      if (i + k >= a.length ? j + k < b.length : a[i + k] !== b[j + k]) return false;
    }
    return true;
  };
  const [removed, added] = hunkSize(start, agree) ?? [a.length - start, b.length - start];
  const excerpt = (prefix: string, lines: string[]) => [
    ...lines.slice(0, SHOWN_LINES).map((line) => `${prefix} ${line}`),
    ...(lines.length > SHOWN_LINES ? [`${prefix} … ${lines.length - SHOWN_LINES} more lines`] : []),
  ];
  return {
    line: start + 1,
    lines: [...excerpt('-', a.slice(start, start + removed)), ...excerpt('+', b.slice(start, start + added))],
  };
}

/** The files in `dir`, but Python's bytecode caches, which running the client in place writes. */
function filesIn(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true, encoding: 'utf8' }).filter(
    (name) => !name.split('/').includes('__pycache__') && statSync(join(dir, name)).isFile(),
  );
}

/**
 * `npm run generate`'s openapi-typescript half (`generate:types`), run on a copy of the contract in
 * a temporary folder, writes exactly the committed generated/: the same files, byte for byte; and
 * its client half writes exactly the client's committed generated/.
 */
export async function checkGenerated(root: string, contract?: ClientContract): Promise<Drift[]> {
  const scratch = mkdtempSync(join(tmpdir(), 'petstore-generate-'));
  try {
    mkdirSync(join(scratch, 'scripts'));
    for (const file of ['package.json', files.contract, GENERATE_CONFIG]) {
      copyFileSync(join(root, file), join(scratch, file));
    }
    // The older versions' releases, which generate their own types beside the newest's.
    cpSync(join(root, RELEASES_DIR), join(scratch, RELEASES_DIR), { recursive: true });
    symlinkSync(join(root, 'node_modules'), join(scratch, 'node_modules'), 'dir');
    const result = await run('npm', ['run', '-s', 'generate:types'], scratch);
    if (result.code !== 0) {
      return [{ what: `npm run generate failed: ${result.stderr.trim()}`, where: files.contract, fix: FIX }];
    }
    const expectedDir = join(scratch, files.generated);
    const expected = new Map(filesIn(expectedDir).map((name) => [name, readFileSync(join(expectedDir, name), 'utf8')]));
    return [...compare(root, files.generated, expected), ...(await checkClient(root, contract))];
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

/**
 * Each client's generated folder, TypeScript's and Python's, is what the contracts generate
 * (`generate:client`): every version's folder from its own contract (openapi.yaml as loaded, each
 * older version's newest release), and nothing else; unchecked when openapi.yaml could not be loaded.
 */
async function checkClient(root: string, contract: ClientContract | undefined): Promise<Drift[]> {
  if (contract === undefined) return [];
  const generated = [...(await generateClient(root, contract))];
  return [clientGeneratedDir, pythonGeneratedDir].flatMap((dir) => {
    const prefix = `${dir}/`;
    const mine = generated.filter(([file]) => file.startsWith(prefix));
    return compare(root, dir, new Map(mine.map(([file, text]) => [file.slice(prefix.length), text])));
  });
}

/** How the files in `dir` differ from `expected` (by name within `dir`): missing, extra or changed. */
function compare(root: string, dir: string, expected: Map<string, string>): Drift[] {
  const committedDir = join(root, dir);
  const names = new Set([...expected.keys(), ...filesIn(committedDir)]);
  const drifts: Drift[] = [];
  for (const name of names) {
    const where = `${dir}/${name}`;
    const want = expected.get(name);
    const committed = join(committedDir, name);
    if (!existsSync(committed)) {
      drifts.push({ what: `${where} is missing: ${files.contract} generates it`, where, fix: FIX });
    } else if (want === undefined) {
      drifts.push({ what: `${where} is not generated from ${files.contract}`, where, fix: FIX });
    } else {
      const have = readFileSync(committed, 'utf8');
      if (want === have) continue;
      const { line, lines } = firstDifference(have, want);
      drifts.push({
        what: `${where} is not what ${files.contract} generates; first difference (- committed, + generated)`,
        where: `${where}:${line}`,
        detail: lines,
        fix: FIX,
      });
    }
  }
  return drifts;
}
