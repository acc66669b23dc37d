/** An earlier claim of a key, as both backends store it. */
export interface IdempotencyClaimRow {
  fingerprint: Buffer;
  resourceId: number;
  /** What the create made, as JSON, as its answer showed it; null for a claim made before it was kept. */
  response: string | null;
}

/** What a claim's create made, as it was then; undefined when the claim did not keep it. */
// eslint-disable-next-line @typescript-eslint/no-unnecessary-type-parameters -- the caller's T, which it stored
export function originalOf<T>(earlier: IdempotencyClaimRow): T | undefined {
  // Written, in the transaction that made it, as JSON.stringify of the T the create returned.
  return earlier.response === null ? undefined : (JSON.parse(earlier.response) as T);
}
