import { ApiError } from '../domain/errors.js';

const CURSOR_VERSION = 'v1:';
const ID = /^[1-9][0-9]{0,15}$/;

/** An opaque cursor naming the last id of a page: base64url of `v1:<id>`. */
export function encodeCursor(lastId: number): string {
  return Buffer.from(`${CURSOR_VERSION}${lastId}`).toString('base64url');
}

/** The id the cursor names; a 400 for anything this service did not issue. */
export function decodeCursor(cursor: string): number {
  const text = Buffer.from(cursor, 'base64url').toString('utf8');
  const digits = text.startsWith(CURSOR_VERSION) ? text.slice(CURSOR_VERSION.length) : '';
  const id = ID.test(digits) ? Number(digits) : Number.NaN;
  if (!Number.isSafeInteger(id) || encodeCursor(id) !== cursor) {
    throw new ApiError(400, 'invalid_request', 'query/cursor is malformed: use the URL from the Link header');
  }
  return id;
}
