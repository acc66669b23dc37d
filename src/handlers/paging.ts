import type { FastifyReply } from 'fastify';
import { cursorScope, decodeCursor, encodeCursor } from './cursors.js';
import type { Page } from '../storage/types.js';

export const DEFAULT_LIMIT = 20;

/** A list as asked for: its path and filters, which its `Link` keeps and its cursors are bound to. */
export class FilteredList {
  private readonly scope: string;

  constructor(
    private readonly path: string,
    private readonly filters: Record<string, string | undefined>,
  ) {
    this.scope = cursorScope(path, filters);
  }

  /** The id a page starts after, from the request's `cursor`: a 400 for one made for another list. */
  afterId(cursor: string | undefined): number | undefined {
    return cursor === undefined ? undefined : decodeCursor(cursor, this.scope);
  }

  /**
   * Returns the page's items, with a `Link: rel="next"` when more follow: the same path and query
   * (`limit`, the filters in order, then `cursor`), so every list pages alike.
   */
  page<T extends { id: number }>(reply: FastifyReply, limit: number, page: Page<T>): T[] {
    const last = page.items.at(-1);
    if (page.hasMore && last !== undefined) {
      const next = new URLSearchParams({ limit: String(limit) });
      for (const [name, value] of Object.entries(this.filters)) if (value !== undefined) next.set(name, value);
      next.set('cursor', encodeCursor(last.id, this.scope));
      reply.header('link', `<${this.path}?${next.toString()}>; rel="next"`);
    }
    return page.items;
  }
}
