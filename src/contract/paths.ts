import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The package root, found from this file whether it runs from src/ or dist/src/. */
function findProjectRoot(start: string): string {
  let dir = start;
  while (!existsSync(join(dir, 'package.json'))) {
    const parent = dirname(dir);
    if (parent === dir) throw new Error(`No package.json above ${start}`);
    dir = parent;
  }
  return dir;
}

export const projectRoot = findProjectRoot(dirname(fileURLToPath(import.meta.url)));
export const contractPath = join(projectRoot, 'openapi.yaml');
/** Each storage backend's numbered SQL migrations. */
export const migrationsDir = (backend: 'sqlite' | 'postgres') =>
  join(projectRoot, 'src', 'storage', backend, 'migrations');

/** What `npm run build` derives from the contract (scripts/build-contract.ts) for a fast start. */
export const compiledContractDir = join(projectRoot, 'dist', 'contract');
