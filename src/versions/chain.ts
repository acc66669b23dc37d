import type { ApiVersion, VersionChange, VersionedEvent, VersionedRequest, VersionedResponse } from './change.js';

/**
 * The versions served, oldest first, and the way between them: a request of version N is migrated
 * up through the changes of every later version, in order, and its response down through them in
 * reverse, so that the one implementation (written against the newest version) answers them all.
 */
export class VersionChain {
  readonly newest: number;
  /**
   * Each version's changes since, oldest first and newest first, listed once: a request and its
   * response go through them on every call.
   */
  private readonly since: Map<number, { up: readonly VersionChange[]; down: readonly VersionChange[] }>;

  constructor(readonly versions: readonly ApiVersion[]) {
    const majors = versions.map(({ major }) => major);
    if (majors.length === 0) throw new Error('a version chain needs at least one version');
    majors.forEach((major, index) => {
      if (index > 0 && major !== (majors[index - 1] ?? 0) + 1) {
        throw new Error(`versions must follow one another: ${majors.join(', ')}`);
      }
    });
    this.since = new Map(
      majors.map((major) => {
        const up = versions.filter((version) => version.major > major).flatMap((version) => version.changes);
        return [major, { up, down: [...up].reverse() }];
      }),
    );
    this.newest = majors.at(-1) ?? 0;
  }

  #changes(major: number) {
    const changes = this.since.get(major);
    if (changes === undefined) throw new Error(`no version ${major}`);
    return changes;
  }

  /** The changes between `major` and the newest version, oldest first. */
  changesSince(major: number): VersionChange[] {
    return [...this.#changes(major).up];
  }

  /** The newest version's operation that answers `operationId` of `major` (itself, unless a change says otherwise). */
  answeringOperation(major: number, operationId: string): string {
    let answering = operationId;
    for (const change of this.#changes(major).up) answering = change.answeredBy?.[answering] ?? answering;
    return answering;
  }

  /** Migrates a request of `major` up to the newest version, in place. */
  requestUp(major: number, request: VersionedRequest): VersionedRequest {
    for (const change of this.#changes(major).up) change.requestUp?.(request);
    return request;
  }

  /** Migrates a response of the newest version down to `major`, in place. */
  responseDown(major: number, response: VersionedResponse): VersionedResponse {
    for (const change of this.#changes(major).down) change.responseDown?.(response);
    return response;
  }

  /** An event payload of the newest version as `major`'s subscribers get it; the newest one is left as it is. */
  eventDown(major: number, event: VersionedEvent): VersionedEvent {
    let migrated = event;
    for (const change of this.#changes(major).down) migrated = change.eventDown?.(migrated) ?? migrated;
    return migrated;
  }
}
