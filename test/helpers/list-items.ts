/**
 * The items of a list's answer, whichever version answered it: v1's bare array, or v2's envelope.
 * The TypeScript client is typed by openapi.yaml (v2) while its suites call /v1, until the clients
 * are generated per version.
 */
export function itemsOf<T>(data: readonly T[] | { data: readonly T[] }): readonly T[] {
  return Array.isArray(data) ? (data as readonly T[]) : (data as { data: readonly T[] }).data;
}
