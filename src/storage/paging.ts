import type { Page } from './types.js';

/**
 * How many rows a list reads for a page of `limit`: one more than it shows, which tells whether
 * another page follows without a second query. Both backends' lists read `ORDER BY id` after the
 * cursor's id (keyset paging).
 */
export const rowsFor = (limit: number): number => limit + 1;

/** The page of `limit` that the rows read for it (rowsFor) make, each row made an item by `itemOf`. */
export function pageOf<R>(rows: R[], limit: number): Page<R>;
export function pageOf<R, T>(rows: R[], limit: number, itemOf: (row: R) => T): Page<T>;
export function pageOf<R, T>(rows: R[], limit: number, itemOf?: (row: R) => T): Page<R | T> {
  const hasMore = rows.length > limit;
  const shown = hasMore ? rows.slice(0, limit) : rows;
  return { items: itemOf === undefined ? shown : shown.map(itemOf), hasMore };
}
