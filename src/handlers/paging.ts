import { cursorScope, decodeCursor, encodeCursor } from './cursors.js';
import type { Page } from '../storage/types.js';

export const DEFAULT_LIMIT = 20;

/** A page as every list answers it: its items, and the cursor of the next page (`null` on the last). */
export interface ListPage<T> {
  data: T[];
  nextCursor: string | null;
}

/**
 * Cursors name their list by its path under /v1, as every cursor issued before v2 did: the list is
 * the same in every version, so a cursor one version gave pages on in another, and those issued
 * before an upgrade stay good after it.
 */
const CURSOR_BASE_PATH = '/v1';

/** A list as asked for: its path (`/pets`, under any version's base path) and filters, which its cursors are bound to. */
export class FilteredList {
  private readonly scope: string;

  constructor(path: string, filters: Record<string, string | undefined>) {
    this.scope = cursorScope(`${CURSOR_BASE_PATH}${path}`, filters);
  }

  /** The id a page starts after, from the request's `cursor`: a 400 for one made for another list. */
  afterId(cursor: string | undefined): number | undefined {
    return cursor === undefined ? undefined : decodeCursor(cursor, this.scope);
  }

  /** The page's items, with the cursor of the page after it when more follow. */
  page<T extends { id: number }>(page: Page<T>): ListPage<T> {
    const last = page.items.at(-1);
    const more = page.hasMore && last !== undefined;
    return { data: page.items, nextCursor: more ? encodeCursor(last.id, this.scope) : null };
  }
}

/** A list served whole, on one page. */
export function wholeList<T>(data: T[]): ListPage<T> {
  return { data, nextCursor: null };
}
