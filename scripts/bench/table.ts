import { closeSync, copyFileSync, existsSync, fsyncSync, openSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { issueKey } from '../../src/auth/api-keys.js';
import { openSqlite } from '../../src/storage/sqlite/index.js';
import type { NewPetRecord, PetStatus, Storage } from '../../src/storage/types.js';

export interface SeededTable {
  /** A valid API key in it. */
  key: string;
  /** A fresh copy of the seeded database for one server run (in `dir`): its DATABASE_URL. */
  freshCopy(dir: string): Promise<string>;
}

/** Where the benchmark's tables live: a SQLite file per table, or a PostgreSQL server. */
export interface Backend {
  name: string;
  seed(dir: string, count: number): Promise<SeededTable>;
  close(): Promise<void>;
}

/** 60% available, 30% pending, 10% sold, in a fixed pattern. */
export function statusOf(id: number): PetStatus {
  const slot = id % 10;
  return slot === 0 ? 'sold' : slot >= 7 ? 'pending' : 'available';
}

function* pets(count: number): Generator<NewPetRecord> {
  for (let id = 1; id <= count; id += 1) {
    yield { name: `Pet ${id}`, categoryId: 1 + (id % 50), status: statusOf(id) };
  }
}

/** Fills a new database through the store and issues a key; returns the key. */
export async function fill(storage: Storage, count: number): Promise<string> {
  try {
    await storage.pets.createMany(pets(count));
    const account = await storage.accounts.createAccount('bench');
    return (await issueKey(storage.accounts, account.id)).key;
  } finally {
    await storage.close();
  }
}

/**
 * A SQLite file per table. Each server run gets a copy, flushed to disk before the server starts:
 * otherwise the kernel writes it back (tens of MB at 1M pets) while the server is measured.
 */
export const sqliteBackend: Backend = {
  name: 'SQLite',
  async seed(dir, count) {
    const file = join(dir, `seed-${count}.db`);
    // Closing the last connection checkpoints the WAL into the file.
    const key = await fill(openSqlite({ filename: file }), count);
    if (existsSync(`${file}-wal`)) throw new Error(`${file} was not checkpointed`);
    return {
      key,
      async freshCopy(runDir) {
        const copy = join(runDir, 'run.db');
        for (const suffix of ['', '-wal', '-shm']) rmSync(copy + suffix, { force: true });
        copyFileSync(file, copy);
        const descriptor = openSync(copy, 'r+');
        try {
          fsyncSync(descriptor);
        } finally {
          closeSync(descriptor);
        }
        return copy;
      },
    };
  },
  close: async () => undefined,
};
