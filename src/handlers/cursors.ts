import { hash } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { ApiError } from '../domain/errors.js';

const CURSOR = /^v2:([1-9][0-9]{0,15})\.([A-Za-z0-9_-]{8})$/;

/**
 * What a cursor is bound to: the list's path and its filters, however they were ordered (not
 * `limit`, which may change from page to page).
 */
export function cursorScope(path: string, filters: Record<string, string | undefined>): string {
  const given = Object.entries(filters)
    .filter(([, value]) => value !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : 1));
  return JSON.stringify([path, given]);
}

/** The tags of the scopes paged most recently: nearly every page of a list is of a list paged before. */
const recentTags = new LRUCache<string, string>({ max: 1_000 });

/** 48 bits of the scope's hash: enough to tell lists apart, not to keep a secret (there is none). */
function scopeTag(scope: string): string {
  let tag = recentTags.get(scope);
  if (tag === undefined) {
    tag = hash('sha256', scope, 'buffer').subarray(0, 6).toString('base64url');
    recentTags.set(scope, tag);
  }
  return tag;
}

/** An opaque cursor naming the last id of a page of the list `scope` names: base64url of `v2:<id>.<tag>`. */
export function encodeCursor(lastId: number, scope: string): string {
  return Buffer.from(`v2:${lastId}.${scopeTag(scope)}`).toString('base64url');
}

/** The id the cursor names; a 400 for anything this service did not issue, or issued for another list. */
export function decodeCursor(cursor: string, scope: string): number {
  const [, digits = '', tag = ''] = CURSOR.exec(Buffer.from(cursor, 'base64url').toString('utf8')) ?? [];
  const id = Number(digits);
  if (!Number.isSafeInteger(id) || Buffer.from(`v2:${digits}.${tag}`).toString('base64url') !== cursor) {
    throw new ApiError(400, 'invalid_request', 'query/cursor is malformed: send it back as the previous page gave it');
  }
  if (tag !== scopeTag(scope)) {
    throw new ApiError(
      400,
      'invalid_request',
      'query/cursor was made for another list or other filters: send it back with the filters it was given with',
    );
  }
  return id;
}
