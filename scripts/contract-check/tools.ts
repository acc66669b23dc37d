import { execFile } from 'node:child_process';
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

/** Runs the project's Redocly CLI (the version in package-lock.json). */
export function redocly(root: string, args: string[]): Promise<CommandResult> {
  return run(join(root, 'node_modules', '.bin', 'redocly'), args, root);
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
