import type { FastifyReply } from 'fastify';
import { decodeCursor, encodeCursor } from './cursors.js';
import type { Page } from '../storage/types.js';

export const DEFAULT_LIMIT = 20;

/** The id a page starts after, from the request's `cursor`. */
export function afterIdOf(cursor: string | undefined): number | undefined {
  return cursor === undefined ? undefined : decodeCursor(cursor);
}

/**
 * Returns the page's items, with a `Link: rel="next"` when more follow: the same path and query
 * (`filters`, in order, then `cursor`), so every list pages alike.
 */
export function pageOf<T extends { id: number }>(
  reply: FastifyReply,
  path: string,
  filters: Record<string, string | undefined>,
  page: Page<T>,
): T[] {
  const last = page.items.at(-1);
  if (page.hasMore && last !== undefined) {
    const next = new URLSearchParams();
    for (const [name, value] of Object.entries(filters)) if (value !== undefined) next.set(name, value);
    next.set('cursor', encodeCursor(last.id));
    reply.header('link', `<${path}?${next.toString()}>; rel="next"`);
  }
  return page.items;
}
