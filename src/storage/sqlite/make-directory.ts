import { existsSync, mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';

/**
 * Creates `directory` and its missing parents, one level at a time. Node 20's recursive mkdirSync
 * never returns under /proc (`/proc/nope`), where a directory that exists refuses a child with
 * ENOENT; a single mkdir fails at once with that error instead.
 */
export function makeDirectory(directory: string): void {
  const missing: string[] = [];
  for (let path = resolve(directory); !existsSync(path) && dirname(path) !== path; path = dirname(path)) {
    missing.unshift(path);
  }
  for (const path of missing) {
    try {
      mkdirSync(path);
    } catch (error) {
      // Created meanwhile by another process: what was wanted.
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
  }
}
