import { randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';

/**
 * Signing as the Standard Webhooks specification says, with its reference package: receivers verify
 * with the same package (or an HMAC by hand) and the secret shown at subscription.
 */

/** Key bytes of a new secret: the specification asks for 24 to 64. */
const SECRET_BYTES = 32;

/** A new signing secret: `whsec_` and the base64 of 32 random bytes. */
export function newWebhookSecret(): string {
  return `whsec_${randomBytes(SECRET_BYTES).toString('base64')}`;
}

/**
 * The headers of one attempt: `webhook-id` (the delivery's id, the same in every attempt),
 * `webhook-timestamp` (this attempt's Unix seconds) and `webhook-signature` (`v1,` and the base64
 * HMAC-SHA256 of `{id}.{timestamp}.{body}` keyed with the secret's bytes).
 */
export function signatureHeaders(secret: string, id: string, body: string, at: Date = new Date()): Record<string, string> {
  return {
    'webhook-id': id,
    'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
    'webhook-signature': new Webhook(secret).sign(id, at, body),
  };
}
