import type { VersionChange } from '../change.js';

interface ErrorBody {
  code: string;
  message: string;
  status: number;
}

/**
 * v2 removes `GET /pets/{petId}`, deprecated in v1 with `GET /pets?id=` as its successor: one way
 * to read a pet, which answers its ETag as getPet did. v1 keeps getPet until its sunset, answered
 * by listPets with the one id.
 */
export const getPetRemoved: VersionChange = {
  description:
    'GET /pets/{petId} is removed, as its deprecation announced: a pet is read with GET /pets?id={petId}, which answers its ETag as getPet did.',
  covers: [{ at: 'GET /pets/{petId}', rule: 'operation-removed' }],
  answeredBy: { getPet: 'listPets' },
  requestUp: (request) => {
    if (request.operationId !== 'getPet') return;
    request.query = { id: [request.params.petId] };
  },
  responseDown: (response) => {
    if (response.operationId !== 'getPet' || response.status !== 200 || !Array.isArray(response.body)) return;
    const [pet] = response.body as unknown[];
    if (pet !== undefined) {
      response.body = pet;
      return;
    }
    const id = String(response.params.petId);
    const notFound: ErrorBody = { code: 'not_found', message: `No pet with id ${id}`, status: 404 };
    response.status = 404;
    response.body = notFound;
  },
};
