import type { VersionChange, VersionedResponse } from '../change.js';

/** A page as v2's lists answer it. */
interface Envelope {
  data: unknown[];
  nextCursor: string | null;
}

/**
 * The lists v1 pages with `Link: rel="next"`, and the query parameters its URL keeps, in the order
 * v1 has always written them (`cursor` last); v1's webhook lists are served whole, without one.
 * This is v1's released behaviour, fixed with its release: a list added to v2 later has no v1 to
 * answer and needs no entry.
 */
const LINKED_QUERY: Readonly<Record<string, readonly string[]>> = {
  listPets: ['limit', 'status', 'id'],
  listOrders: ['limit', 'status'],
};

function isEnvelope(body: unknown): body is Envelope {
  return (
    typeof body === 'object' && body !== null && Array.isArray((body as Partial<Envelope>).data) && 'nextCursor' in body
  );
}

/** A validated query parameter as v1's `Link` writes it: a list of ids comma-separated (`id=3,7`). */
function written(value: unknown): string | undefined {
  if (Array.isArray(value)) return value.join(',');
  return typeof value === 'string' || typeof value === 'number' ? String(value) : undefined;
}

/** v1's `Link` to the next page: the request's path and its query, with the cursor v2 gave. */
function nextLink({ url = '', query = {} }: VersionedResponse, kept: readonly string[], cursor: string): string {
  const queryAt = url.indexOf('?');
  const path = queryAt === -1 ? url : url.slice(0, queryAt);
  const next = new URLSearchParams();
  for (const name of kept) {
    const value = written(query[name]);
    if (value !== undefined) next.set(name, value);
  }
  next.set('cursor', cursor);
  return `<${path}?${next.toString()}>; rel="next"`;
}

/**
 * v2's lists answer a page as `{data, nextCursor}`, the cursor in the body where every client reads
 * it, not in a header some proxies and browsers' CORS hide. v1 keeps its bare arrays, and the next
 * page in `Link: rel="next"` with the same cursor, so a cursor from either version pages on in the
 * other.
 */
/** The refusals of a cursor, in v2's words (handlers/cursors.ts) and in v1's, as it answered them. */
const V1_CURSOR_WORDS = new Map([
  [
    'query/cursor is malformed: send it back as the previous page gave it',
    'query/cursor is malformed: use the URL from the Link header',
  ],
  [
    'query/cursor was made for another list or other filters: send it back with the filters it was given with',
    'query/cursor was made for another list or other filters: use the URL from the Link header as it is',
  ],
]);

export const listEnvelopes: VersionChange = {
  description:
    'Lists (GET /pets, /store/orders, /webhooks and /webhooks/{webhookId}/deliveries) answer {data, nextCursor} instead of a bare array: the next page is asked for with ?cursor={nextCursor}, and no Link header is sent.',
  // GET /store/orders is beta (x-stability-level), so its envelope is no breaking difference to cover.
  covers: [
    { at: 'GET /pets responses/200' },
    { at: 'GET /webhooks responses/200/content' },
    { at: 'GET /webhooks/{webhookId}/deliveries responses/200/content' },
  ],
  responseDown: (response) => {
    if (response.status === 400) {
      // v1's words for a cursor refused, which send its client back to the Link header.
      const body = response.body as { detail?: unknown } | undefined;
      const older = typeof body?.detail === 'string' ? V1_CURSOR_WORDS.get(body.detail) : undefined;
      if (older !== undefined) response.body = { ...body, detail: older };
      return;
    }
    // Any v2 page, getPet's too (answered by listPets; getPetRemoved, listed before, takes its one pet).
    if (response.status !== 200 || !isEnvelope(response.body)) return;
    const { data, nextCursor } = response.body;
    response.body = data;
    const kept = LINKED_QUERY[response.operationId];
    if (nextCursor !== null && kept !== undefined) response.headers.link = nextLink(response, kept, nextCursor);
  },
};
