import type { VersionChange, VersionedEvent, VersionedResponse } from '../change.js';

const V2_FIELDS = new Set(['createdAt', 'updatedAt']);

/**
 * A copy of a pet without v2's fields (the answer may be a replay, kept as it was first sent), made
 * by leaving them out rather than deleting them: an object with properties deleted becomes a
 * dictionary, slower for the serializer to read.
 */
function withoutTimestamps(pet: unknown): unknown {
  if (typeof pet !== 'object' || pet === null) return pet;
  const newer = pet as Record<string, unknown>;
  const older: Record<string, unknown> = {};
  for (const key in newer) if (!V2_FIELDS.has(key)) older[key] = newer[key];
  return older;
}

/**
 * Whether a body is a Pet: the contract's only schema with a `categoryId`. Read from the answer,
 * not from a list of operations, so an operation added later that answers pets needs no edit here.
 */
function isPet(body: unknown): boolean {
  return typeof body === 'object' && body !== null && 'categoryId' in body;
}

function petsOf(body: unknown): unknown[] | undefined {
  if (Array.isArray(body)) return body as unknown[];
  const data = (body as { data?: unknown } | null)?.data;
  return Array.isArray(data) ? (data as unknown[]) : undefined;
}

/**
 * v2's Pet says when it was added and last changed; v1's Pet has exactly the four fields it always
 * had, in answers and in events alike.
 */
export const petTimestamps: VersionChange = {
  description:
    'A Pet carries createdAt and updatedAt (RFC 3339, UTC), set by the service; updatedAt moves forward on every change. Pets added before 2.0.0 carry the time of the upgrade.',
  // The breaking-change check reports the new properties once, where it first meets Pet (GET /pets
  // answers a page in v2, which listEnvelopes covers whole).
  covers: [
    { at: 'POST /pets responses/201/content/application/json/schema/properties/createdAt' },
    { at: 'POST /pets responses/201/content/application/json/schema/properties/updatedAt' },
  ],
  responseDown: (response: VersionedResponse) => {
    if (response.status >= 300) return;
    const pets = petsOf(response.body);
    if (pets === undefined) {
      if (isPet(response.body)) response.body = withoutTimestamps(response.body);
      return;
    }
    if (!pets.some(isPet)) return;
    const older = pets.map(withoutTimestamps);
    response.body = Array.isArray(response.body) ? older : { ...(response.body as object), data: older };
  },
  eventDown: (event: VersionedEvent) =>
    isPet(event.payload.data)
      ? { ...event, payload: { ...event.payload, data: withoutTimestamps(event.payload.data) } }
      : event,
};
