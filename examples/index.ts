/** The example tasks `stepwise dev` (and `make run`) load when no --tasks is given. */
export { orderApproval } from './order-approval';
export { onboardingDrip } from './onboarding-drip';
export { flakyApi } from './flaky-api';
export { weekdayDigest } from './weekday-digest';
export { photoBatch, resizePhoto } from './photo-batch';
export { reindexUser, syncTenant } from './flow-control';
export { fulfilOrder } from './fulfil-order';
export { sendInvoice } from './send-invoice';
