import t from 'tap';
import { ApiError } from '../src/domain/errors.js';
import { preconditionsOf, StoreRules } from '../src/domain/rules.js';
import type { PetState, PetStatus } from '../src/domain/types.js';
import { contract } from './helpers/contract.js';

// The store's rules, decided on a pet as it is: the moves the contract's x-transitions allow and
// the preconditions of RFC 9110.

const rules = new StoreRules(contract.dereferenced);
const STATUSES: PetStatus[] = ['available', 'pending', 'sold'];

const pet = (status: PetStatus, version = 3, placedOrderId?: number): PetState => ({
  pet: {
    id: 1,
    name: 'Rex',
    categoryId: 1,
    status,
    createdAt: '2026-11-25T10:00:00.000Z',
    updatedAt: '2026-11-25T10:05:00.000Z',
  },
  version,
  placedOrderId,
});

const outcome = (run: () => unknown) => {
  try {
    return run();
  } catch (error) {
    if (error instanceof ApiError) return `${error.statusCode} ${error.code}`;
    throw error;
  }
};

t.test("a status moves exactly as the contract's x-transitions say", async (t) => {
  const declared = (contract.dereferenced.components?.schemas?.PetStatus as { 'x-transitions': object })[
    'x-transitions'
  ] as Record<PetStatus, PetStatus[]>;
  for (const from of STATUSES) {
    for (const to of STATUSES.filter((status) => status !== from)) {
      const expected = declared[from].includes(to) ? { status: to } : '409 invalid_transition';
      t.same(
        outcome(() => rules.changePet({ status: to }, {})(pet(from))),
        expected,
        `${from} -> ${to}`,
      );
    }
  }
  t.equal(rules.changePet({ status: 'sold' }, {})(pet('sold')), undefined, 'the status it has is no move');
});

t.test('a change holds only the fields that differ', async (t) => {
  t.same(rules.changePet({ name: 'Rex', categoryId: 2 }, {})(pet('available')), { categoryId: 2 });
  t.equal(rules.changePet({ name: 'Rex' }, {})(pet('available')), undefined);
});

t.test('while an order is placed, only the order moves the pet', async (t) => {
  t.equal(
    outcome(() => rules.changePet({ status: 'available' }, {})(pet('pending', 3, 9))),
    '409 pet_on_order',
  );
  t.equal(
    outcome(() => rules.removePet({})(pet('pending', 3, 9))),
    '409 pet_on_order',
  );
  t.same(rules.changePet({ name: 'Max' }, {})(pet('pending', 3, 9)), { name: 'Max' }, 'a rename is no move');
});

t.test('an order takes an available pet only', async (t) => {
  t.equal(rules.placeOrder(1)(pet('available')), 'pending');
  t.equal(
    outcome(() => rules.placeOrder(1)(undefined)),
    '409 pet_not_available',
  );
  t.equal(
    outcome(() => rules.placeOrder(1)(pet('sold'))),
    '409 pet_not_available',
  );
  t.equal(
    outcome(() => rules.placeOrder(1)(pet('available', 3, 9))),
    '409 pet_not_available',
  );
});

t.test('If-Match and If-None-Match, as RFC 9110 13.2.2 evaluates them', async (t) => {
  const change = (headers: Record<string, string>) =>
    outcome(() => rules.changePet({ name: 'Max' }, preconditionsOf(headers))(pet('available', 3)));
  const applied = { name: 'Max' };
  t.same(change({ 'if-match': '"3"' }), applied);
  t.same(change({ 'if-match': '"2", "3"' }), applied, 'any tag of the list');
  t.same(change({ 'if-match': '"3",,' }), applied, 'empty list elements are ignored');
  t.same(change({ 'if-match': '*' }), applied);
  t.equal(change({ 'if-match': '"2"' }), '412 precondition_failed');
  t.equal(change({ 'if-match': 'W/"3"' }), '412 precondition_failed', 'If-Match compares strongly');
  t.equal(change({ 'if-match': '3' }), '412 precondition_failed', 'an unreadable header is never ignored');
  t.equal(change({ 'if-none-match': '*' }), '412 precondition_failed');
  t.equal(change({ 'if-none-match': 'W/"3"' }), '412 precondition_failed', 'If-None-Match compares weakly');
  t.same(change({ 'if-none-match': '"2"' }), applied);
  t.equal(change({ 'if-match': '"3"', 'if-none-match': '"3"' }), '412 precondition_failed');
});
