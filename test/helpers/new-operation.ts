/** An operation the contract does not have yet (deletePet), as a team would add it to openapi.yaml. */
export const DELETE_PET = `    delete:
      operationId: deletePet
      summary: Remove an animal
      description: Removes the animal from the catalogue.
      tags: [pets]
      parameters:
        - $ref: '#/components/parameters/PetId'
      responses:
        '204':
          description: The animal was removed.
          headers:
            X-Request-Id:
              $ref: '#/components/headers/XRequestId'
        '400':
          $ref: '#/components/responses/BadRequest'
        '401':
          $ref: '#/components/responses/Unauthorized'
        '404':
          description: No animal has this id.
          content:
            application/json:
              schema:
                $ref: '#/components/schemas/Error'
              examples:
                notFound:
                  value: { code: not_found, message: No pet with this id, status: 404 }
`;

/** openapi.yaml's text with deletePet added. */
export function withDeletePet(contract: string): string {
  return contract.replace('  /pets/{petId}:\n', `  /pets/{petId}:\n${DELETE_PET}`);
}
