import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface Migration {
  version: number;
  file: string;
  sql: string;
}

/** The numbered migrations in `dir` (`001-name.sql`, ...), in order; two with one number are refused. */
export function readMigrations(dir: string): Migration[] {
  const migrations = readdirSync(dir)
    .filter((file) => /^\d{3}-[\w-]+\.sql$/.test(file))
    .sort()
    .map((file) => ({
      version: Number.parseInt(file.slice(0, 3), 10),
      file,
      sql: readFileSync(join(dir, file), 'utf8'),
    }));
  const twice = migrations.find((migration, at) => migrations[at - 1]?.version === migration.version);
  if (twice !== undefined) {
    throw new Error(`${dir}: two migrations are numbered ${twice.file.slice(0, 3)}: renumber the newer one`);
  }
  return migrations;
}
