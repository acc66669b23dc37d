/**
 * Python for the tests of the Python client: a virtual environment made once per build under
 * dist/python/ (shared by the files that run at once, made by whichever gets there first), the
 * client's source, and running a script there.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { projectRoot } from '../../src/contract/paths.js';

const run = promisify(execFile);

export const pythonClientDir = join(projectRoot, 'clients', 'python');
const PYTHON = process.env.PYTHON ?? 'python3';
/** What the tests install beside the client's own dependencies: the type checker, the wheel builder. */
const DEV_PACKAGES = ['httpx', 'pydantic>=2.11', 'typing-extensions', 'mypy', 'hatchling'];
/** How long a venv another test file is making may take before it is taken for abandoned. */
const STALE_LOCK_MS = 5 * 60_000;

/**
 * pip's environment: no retries against an index that cannot be reached (this machine's pip names
 * a local index beside the default one, which is offline here), no version check, no prompts.
 */
export const PIP_ENV = {
  ...process.env,
  PIP_RETRIES: '0',
  PIP_DISABLE_PIP_VERSION_CHECK: '1',
  PIP_NO_INPUT: '1',
  PYTHONDONTWRITEBYTECODE: '1',
};

/** A new virtual environment at `dir` with `packages` installed; its python. */
export async function makeVenv(dir: string, packages: string[]): Promise<string> {
  await run(PYTHON, ['-m', 'venv', dir], { env: PIP_ENV });
  const python = join(dir, 'bin', 'python');
  if (packages.length > 0) {
    await run(python, ['-m', 'pip', 'install', '--quiet', ...packages], { env: PIP_ENV, maxBuffer: 16 << 20 });
  }
  return python;
}

async function sleep(ms: number): Promise<void> {
  await new Promise((resolve) => setTimeout(resolve, ms));
}

/** The python of the shared development venv (dist/python/dev), made if missing. */
export async function devPython(): Promise<string> {
  const key = createHash('sha256').update(DEV_PACKAGES.join('\n')).digest('hex').slice(0, 12);
  const root = join(projectRoot, 'dist', 'python');
  const dir = join(root, `dev-${key}`);
  const ready = join(dir, '.ready');
  const lock = join(root, `dev-${key}.lock`);
  mkdirSync(root, { recursive: true });
  for (;;) {
    if (existsSync(ready)) return join(dir, 'bin', 'python');
    try {
      mkdirSync(lock);
    } catch {
      const age = Date.now() - (statSync(lock, { throwIfNoEntry: false })?.mtimeMs ?? Date.now());
      if (age > STALE_LOCK_MS) rmSync(lock, { force: true, recursive: true });
      await sleep(250);
      continue;
    }
    try {
      if (!existsSync(ready)) {
        rmSync(dir, { recursive: true, force: true });
        await makeVenv(dir, DEV_PACKAGES);
        writeFileSync(ready, DEV_PACKAGES.join('\n'));
      }
    } finally {
      rmSync(lock, { recursive: true, force: true });
    }
  }
}

/** Builds the client's wheel into `outDir` as a user would (`pip wheel`); its path. */
export async function buildWheel(python: string, outDir: string): Promise<string> {
  const { stdout } = await run(
    python,
    ['-m', 'pip', 'wheel', '--no-deps', '--no-build-isolation', '--wheel-dir', outDir, pythonClientDir],
    { env: PIP_ENV },
  );
  const name = /(petstore_client-\S+\.whl)/.exec(stdout)?.[1] ?? /filename=(\S+\.whl)/.exec(stdout)?.[1];
  if (name === undefined) throw new Error(`pip wheel named no wheel: ${stdout}`);
  return join(outDir, name);
}

/** The ```python blocks of a Markdown file. */
export function pythonBlocks(markdown: string): string[] {
  return [...markdown.matchAll(/```python\n([\s\S]*?)```/g)].map(([, block]) => block ?? '');
}

/** docs/client-python.md's text. */
export const pythonDocs = (): string => readFileSync(join(projectRoot, 'docs', 'client-python.md'), 'utf8');

/** Runs `script` with `python` and the client's source on its path; its output, or the error with it. */
export async function runPython(
  python: string,
  args: string[],
  env: Record<string, string> = {},
  timeoutMs = 120_000,
): Promise<{ stdout: string; stderr: string }> {
  return run(python, args, {
    env: { ...PIP_ENV, PYTHONPATH: join(pythonClientDir, 'src'), ...env },
    timeout: timeoutMs,
    maxBuffer: 16 << 20,
  });
}
