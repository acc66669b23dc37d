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
  changePet(patch: PetFields, ifMatch: EntityTagCondition | undefined): (current: PetState) => PetFields | undefined {
    return (current) => {
      requireMatch(ifMatch, current);
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

  /** A removal of a pet: refused while it has a placed order, or when If-Match does not match. */
  removePet(ifMatch: EntityTagCondition | undefined): (current: PetState) => void {
    return (current) => {
      requireMatch(ifMatch, current);
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

/** An `If-Match` header, parsed: `*`, or the strong entity tags it lists. */
export type EntityTagCondition = '*' | readonly string[];

const ENTITY_TAG = /^(W\/)?"[\x21\x23-\x7E\x80-\xFF]*"$/;

/**
 * Parses `If-Match` (RFC 9110 13.1.1). One that is neither `*` nor a list of entity tags matches
 * nothing: the change is refused with a 412, never applied on a condition that could not be read.
 */
export function parseIfMatch(header: string | undefined): EntityTagCondition | undefined {
  if (header === undefined) return undefined;
  if (header.trim() === '*') return '*';
  const tags = header.split(',').map((tag) => tag.trim());
  if (tags.some((tag) => !ENTITY_TAG.test(tag))) return [];
  // Weak tags never match for If-Match, which compares strongly.
  return tags.filter((tag) => !tag.startsWith('W/'));
}

function requireMatch(condition: EntityTagCondition | undefined, current: VersionedPet): void {
  if (condition === undefined || condition === '*') return;
  const tag = entityTag(current);
  if (!condition.includes(tag)) {
    throw new ApiError(412, 'precondition_failed', `Pet ${current.pet.id} has changed: its ETag is now ${tag}`, {
      etag: tag,
    });
  }
}
