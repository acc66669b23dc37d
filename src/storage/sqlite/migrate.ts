import type { Database } from 'better-sqlite3';
import { readMigrations } from '../migrations.js';

/**
 * Applies the numbered migrations newer than the database's `user_version`, each in its own
 * transaction, and returns how many ran.
 */
export function migrate(db: Database, dir: string): number {
  const current = db.pragma('user_version', { simple: true }) as number;
  const pending = readMigrations(dir).filter((migration) => migration.version > current);
  for (const { version, sql } of pending) {
    db.transaction(() => {
      db.exec(sql);
      db.pragma(`user_version = ${version}`);
    }).immediate();
  }
  return pending.length;
}
