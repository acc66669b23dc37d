import { closeSync, copyFileSync, existsSync, fsyncSync, openSync, rmSync } from 'node:fs';
import { issueKey } from '../../src/auth/api-keys.js';
import { openSqlite } from '../../src/storage/sqlite/index.js';
import type { NewPetRecord, PetStatus } from '../../src/storage/types.js';

export interface SeededTable {
  /** The SQLite file, checkpointed and closed: copy it for each server run. */
  file: string;
  pets: number;
  /** A valid API key in it. */
  key: string;
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

/** Fills a new database through the store (one transaction) and issues a key. */
export async function seedTable(file: string, count: number): Promise<SeededTable> {
  const storage = openSqlite({ filename: file });
  try {
    await storage.pets.createMany(pets(count));
    const account = await storage.accounts.createAccount('bench');
    const { key } = await issueKey(storage.accounts, account.id);
    return { file, pets: count, key };
  } finally {
    // Closing the last connection checkpoints the WAL into the file.
    await storage.close();
  }
}

/**
 * A fresh copy of the seeded database, so every server run starts from the same table. Flushed to
 * disk before the server starts: otherwise the kernel writes the copy back (tens of MB at 1M pets)
 * while the server is being measured, on the same two cores.
 */
export function freshCopy(table: SeededTable, file: string): string {
  for (const suffix of ['', '-wal', '-shm']) rmSync(file + suffix, { force: true });
  if (existsSync(`${table.file}-wal`)) throw new Error(`${table.file} was not checkpointed`);
  copyFileSync(table.file, file);
  const descriptor = openSync(file, 'r+');
  try {
    fsyncSync(descriptor);
  } finally {
    closeSync(descriptor);
  }
  return file;
}
