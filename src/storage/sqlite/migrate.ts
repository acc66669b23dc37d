import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Database } from 'better-sqlite3';

/**
 * Applies the numbered migrations (`001-name.sql`, ...) newer than the database's
 * `user_version`, each in its own transaction, and returns how many ran.
 */
export function migrate(db: Database, dir: string): number {
  const files = readdirSync(dir)
    .filter((file) => /^\d{3}-[\w-]+\.sql$/.test(file))
    .sort();
  const current = db.pragma('user_version', { simple: true }) as number;
  let applied = 0;
  for (const file of files) {
    const version = Number.parseInt(file.slice(0, 3), 10);
    if (version <= current) continue;
    const sql = readFileSync(join(dir, file), 'utf8');
    db.transaction(() => {
      db.exec(sql);
      db.pragma(`user_version = ${version}`);
    }).immediate();
    applied += 1;
  }
  return applied;
}
