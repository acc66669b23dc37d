import type { OpenApiDocument } from '../contract/document.js';
import { ApiError } from './errors.js';
import type { Order, OrderChange, OrderStatus, PetFields, PetState, PetStatus, VersionedPet } from './types.js';
import { Transitions } from './transitions.js';

/**
 * The store's rules, applied inside the transaction that writes each change (storage/types.ts,
 * `Decide`): how a pet's and an order's status may move, and preconditions. They are the same on
 * every backend, and the transitions are the contract's.
 */
export class StoreRules {
  readonly petStatus: Transitions<PetStatus>;
  readonly orderStatus: Transitions<OrderStatus>;

  constructor(document: OpenApiDocument) {
    this.petStatus = Transitions.of(document, 'PetStatus');
    this.orderStatus = Transitions.of(document, 'OrderStatus');
  }

  /** A patch of a pet: the fields that differ from the pet as it is, or a refusal. */
  changePet(patch: PetFields, preconditions: Preconditions): (current: PetState) => PetFields | undefined {
    return (current) => {
      requireMatch(preconditions, current);
      const { pet } = current;
      const changed: PetFields = {};
      if (patch.name !== undefined && patch.name !== pet.name) changed.name = patch.name;
      if (patch.categoryId !== undefined && patch.categoryId !== pet.categoryId) changed.categoryId = patch.categoryId;
      if (patch.status !== undefined && patch.status !== pet.status) {
        this.movePet(current, patch.status);
        changed.status = patch.status;
      }
      return Object.keys(changed).length === 0 ? undefined : changed;
    };
  }

  /** A removal of a pet: refused while it has a placed order, or when a precondition fails. */
  removePet(preconditions: Preconditions): (current: PetState) => void {
    return (current) => {
      requireMatch(preconditions, current);
      refuseWhileOnOrder(current);
    };
  }

  /** An order for a pet: it must exist and be available; it becomes pending. */
  placeOrder(petId: number): (pet: PetState | undefined) => PetStatus {
    return (current) => {
      if (current === undefined) throw new ApiError(409, 'pet_not_available', `No pet with id ${petId} to order`);
      if (current.pet.status !== 'available' || current.placedOrderId !== undefined) {
        throw new ApiError(409, 'pet_not_available', `Pet ${petId} is ${current.pet.status}, not available`);
      }
      const reserved: PetStatus = 'pending';
      if (!this.petStatus.allows('available', reserved)) throw notAllowed(`Pet ${petId}`, 'available', reserved);
      return reserved;
    };
  }

  /** An order's move: completed sells its pet, cancelled makes it available again. */
  changeOrder(status: OrderPatchStatus): (current: Order) => OrderChange | undefined {
    return (current) => {
      if (current.status === status) return undefined;
      if (!this.orderStatus.allows(current.status, status)) {
        throw notAllowed(`Order ${current.id}`, current.status, status);
      }
      return { status, petStatus: PET_STATUS_AFTER[status] };
    };
  }

  private movePet(current: PetState, to: PetStatus): void {
    refuseWhileOnOrder(current);
    if (!this.petStatus.allows(current.pet.status, to))
      throw notAllowed(`Pet ${current.pet.id}`, current.pet.status, to);
  }
}

type OrderPatchStatus = Exclude<OrderStatus, 'placed'>;

const PET_STATUS_AFTER: Record<OrderPatchStatus, PetStatus> = { completed: 'sold', cancelled: 'available' };

function notAllowed(what: string, from: string, to: string): ApiError {
  return new ApiError(409, 'invalid_transition', `${what} cannot move from ${from} to ${to}`);
}

function refuseWhileOnOrder({ pet, placedOrderId }: PetState): void {
  if (placedOrderId === undefined) return;
  throw new ApiError(
    409,
    'pet_on_order',
    `Pet ${pet.id} has a placed order (${placedOrderId}); complete or cancel it first`,
  );
}

/** A pet's ETag: its version, as a strong entity tag. */
export function entityTag({ version }: VersionedPet): string {
  return `"${version}"`;
}

/**
 * An `If-Match` or `If-None-Match` header, parsed: `*`, the entity tags it lists, or `unreadable`
 * when it is neither (the change is then refused with a 412, never applied on a condition that
 * could not be read).
 */
export type EntityTagCondition = '*' | readonly string[] | 'unreadable';

/** The preconditions of a change (RFC 9110 13.1): each absent when its header was not sent. */
export interface Preconditions {
  ifMatch?: EntityTagCondition | undefined;
  ifNoneMatch?: EntityTagCondition | undefined;
}

/** One element of a list of entity tags, and the comma or end after it; an element may be empty. */
const TAG_LIST_ELEMENT = /[ \t]*((?:W\/)?"[\x21\x23-\x7E\x80-\xFF]*")?[ \t]*(,|$)/y;

/**
 * Parses `If-Match` or `If-None-Match` (RFC 9110 13.1.1, 13.1.2). Empty list elements are ignored
 * (RFC 9110 5.6.1: `"1",,` is `"1"`); a tag may hold a comma, so the list is read tag by tag.
 */
function parseCondition(header: string | undefined): EntityTagCondition | undefined {
  if (header === undefined) return undefined;
  if (header.trim() === '*') return '*';
  const tags: string[] = [];
  TAG_LIST_ELEMENT.lastIndex = 0;
  while (TAG_LIST_ELEMENT.lastIndex < header.length) {
    const element = TAG_LIST_ELEMENT.exec(header);
    if (element === null) return 'unreadable';
    if (element[1] !== undefined) tags.push(element[1]);
    if (element[2] === '') break;
  }
  return tags;
}

/** The `If-Match` and `If-None-Match` of a request. */
export function preconditionsOf(headers: {
  'if-match'?: string | undefined;
  'if-none-match'?: string | undefined;
}): Preconditions {
  return { ifMatch: parseCondition(headers['if-match']), ifNoneMatch: parseCondition(headers['if-none-match']) };
}

/** The opaque part of an entity tag: weak comparison ignores `W/` (RFC 9110 8.8.3.2). */
const opaque = (tag: string) => (tag.startsWith('W/') ? tag.slice(2) : tag);

/** Evaluated in the order of RFC 9110 13.2.2: If-Match, then If-None-Match; a 412 when one fails. */
function requireMatch({ ifMatch, ifNoneMatch }: Preconditions, current: VersionedPet): void {
  const tag = entityTag(current);
  const { id } = current.pet;
  // The 412 carries the pet's current ETag, to decide again on the pet as it is.
  const failed = (message: string) => new ApiError(412, 'precondition_failed', message, { etag: tag });
  if (ifMatch === 'unreadable') throw failed('If-Match must be * or a list of entity tags ("3", "4")');
  // Strong comparison: a weak tag never matches.
  if (ifMatch !== undefined && ifMatch !== '*' && !ifMatch.includes(tag)) {
    throw failed(`Pet ${id} has changed: its ETag is now ${tag}`);
  }
  if (ifNoneMatch === 'unreadable') throw failed('If-None-Match must be * or a list of entity tags ("3", "4")');
  if (ifNoneMatch === '*') throw failed(`Pet ${id} exists, and If-None-Match is *`);
  if (ifNoneMatch?.some((named) => opaque(named) === tag) === true) {
    throw failed(`Pet ${id} has the ETag ${tag}, which If-None-Match names`);
  }
}
