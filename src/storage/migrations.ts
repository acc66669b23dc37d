import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface Migration {
  version: number;
  file: string;
  sql: string;
}

/** The numbered migrations in `dir` (`001-name.sql`, ...), in order. */
export function readMigrations(dir: string): Migration[] {
  return readdirSync(dir)
    .filter((file) => /^\d{3}-[\w-]+\.sql$/.test(file))
    .sort()
    .map((file) => ({
      version: Number.parseInt(file.slice(0, 3), 10),
      file,
      sql: readFileSync(join(dir, file), 'utf8'),
    }));
}
