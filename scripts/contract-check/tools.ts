import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { isDeepStrictEqual, promisify } from 'node:util';
import type { OpenAPIV3_1 } from 'openapi-types';
import type { Contract, ContractOperation } from '../../src/contract/document.js';

/** The operation object (dereferenced) behind one of the contract's operations. */
export function operationObject(
  contract: Contract,
  { method, path }: ContractOperation,
): OpenAPIV3_1.OperationObject | undefined {
  const item = contract.dereferenced.paths?.[path] as
    Record<string, OpenAPIV3_1.OperationObject | undefined> | undefined;
  return item?.[method.toLowerCase()];
}

const execFileAsync = promisify(execFile);

export interface CommandResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a command to completion; a non-zero exit is a result, not an exception. */
export async function run(
  command: string,
  args: string[],
  cwd: string,
  environment: NodeJS.ProcessEnv = process.env,
): Promise<CommandResult> {
  const env = { ...environment, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_NOTIFICATIONS: 'true' };
  try {
    const { stdout, stderr } = await execFileAsync(command, args, { cwd, env, maxBuffer: 64 * 1024 * 1024 });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code?: unknown; stdout?: string; stderr?: string; message: string };
    if (typeof failed.code !== 'number') throw error; // could not start it at all
    return { code: failed.code, stdout: failed.stdout ?? '', stderr: failed.stderr ?? failed.message };
  }
}

/** What a Redocly report depends on besides its arguments: the CLI's version and the ruleset. */
const REDOCLY_INPUTS = [
  join('node_modules', '@redocly', 'cli', 'package.json'),
  'redocly.yaml',
  '.redocly.lint-ignore.yaml',
];

/**
 * The hash of everything a Redocly command reads: its arguments, the bytes of each argument that
 * names a file (the contracts hold no external `$ref`s), the CLI's version and the ruleset.
 */
function redoclyKey(root: string, args: string[]): string {
  const hash = createHash('sha256');
  for (const name of [...REDOCLY_INPUTS, ...args]) {
    const file = join(root, name);
    hash.update(`${name}\0`);
    if (existsSync(file) && statSync(file).isFile()) hash.update(readFileSync(file));
    hash.update('\0');
  }
  return hash.digest('hex');
}

/**
 * Runs the project's Redocly CLI (the version in package-lock.json). Its reports are kept in
 * node_modules/.cache/petstore-redocly/ by the hash of what they depend on: contract:check asks the
 * same diffs of unchanged releases on every run (and several checks ask the same one), and each
 * Redocly start costs about a second of CPU. A report naming the folder it ran in is not kept.
 */
export function redocly(root: string, args: string[]): Promise<CommandResult> {
  const cache = join(root, 'node_modules', '.cache', 'petstore-redocly');
  const kept = join(cache, `${redoclyKey(root, args)}.json`);
  if (existsSync(kept)) return Promise.resolve(JSON.parse(readFileSync(kept, 'utf8')) as CommandResult);
  // Checks running at once ask the same report once.
  let running = redoclyRunning.get(kept);
  if (running === undefined) {
    running = runAndKeep(root, args, cache, kept).finally(() => redoclyRunning.delete(kept));
    redoclyRunning.set(kept, running);
  }
  return running;
}

const redoclyRunning = new Map<string, Promise<CommandResult>>();

async function runAndKeep(root: string, args: string[], cache: string, kept: string): Promise<CommandResult> {
  const result = await run(join(root, 'node_modules', '.bin', 'redocly'), args, root);
  if (!`${result.stdout}${result.stderr}`.includes(root)) {
    mkdirSync(cache, { recursive: true });
    // Written whole, then renamed: a check running beside this one never reads half a report.
    const partial = `${kept}.${process.pid}`;
    writeFileSync(partial, JSON.stringify(result));
    renameSync(partial, kept);
  }
  return result;
}

/** Parses a tool's JSON report, or fails saying what the tool printed instead. */
export function parseReport(tool: string, result: CommandResult): unknown {
  try {
    return JSON.parse(result.stdout);
  } catch {
    throw new Error(`${tool} did not print a JSON report (exit ${result.code}):\n${result.stderr}${result.stdout}`);
  }
}

/** The JSON pointer of the first place two JSON values differ, or undefined when they are equal. */
export function firstMismatch(a: unknown, b: unknown, pointer = ''): string | undefined {
  if (isDeepStrictEqual(a, b)) return undefined;
  if (
    typeof a !== 'object' ||
    typeof b !== 'object' ||
    a === null ||
    b === null ||
    Array.isArray(a) !== Array.isArray(b)
  ) {
    return pointer || '/';
  }
  const left = a as Record<string, unknown>;
  const right = b as Record<string, unknown>;
  for (const key of new Set([...Object.keys(left), ...Object.keys(right)])) {
    const mismatch = firstMismatch(
      left[key],
      right[key],
      `${pointer}/${key.replaceAll('~', '~0').replaceAll('/', '~1')}`,
    );
    if (mismatch !== undefined) return mismatch;
  }
  return pointer || '/';
}
