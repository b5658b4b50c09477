// An OpenID Connect provider on loopback for sluice's `oidc` tests:
// panva's oidc-provider (an OpenID-certified implementation), with one
// confidential client, PKCE required, refresh tokens, RP-initiated logout,
// and a login page of the test's own that signs the browser in at once as
// the account named by the request's `login_hint` (default "alice"), so a
// test drives the whole authorization-code flow by following redirects.
//
// Usage: node provider.mjs --redirect URL --after-logout URL [--id-ttl SECONDS]
// Prints "listening http://127.0.0.1:PORT" once it serves.
import http from 'node:http';
import { parseArgs } from 'node:util';
import Provider from 'oidc-provider';

const { values: args } = parseArgs({
  options: {
    redirect: { type: 'string' },
    'after-logout': { type: 'string' },
    'id-ttl': { type: 'string', default: '3600' },
    secret: { type: 'string', default: 'sluice-test-client-secret' },
  },
});

const server = http.createServer();
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;

const provider = new Provider(issuer, {
  clients: [{
    client_id: 'sluice',
    client_secret: args.secret,
    redirect_uris: [args.redirect],
    post_logout_redirect_uris: [args['after-logout']],
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_basic',
  }],
  pkce: { required: () => true },
  features: {
    devInteractions: { enabled: false },
    rpInitiatedLogout: {
      enabled: true,
      // Logs out without a confirmation page.
      logoutSource: async (ctx, form) => {
        ctx.type = 'html';
        ctx.body = `<html><body>${form}<script>document.forms[0].submit()</script></body></html>`;
      },
    },
  },
  claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'] },
  conformIdTokenClaims: false,
  findAccount: async (ctx, id) => ({
    accountId: id,
    claims: async () => ({ sub: id, email: `${id}@example.test`, email_verified: true, name: id }),
  }),
  ttl: {
    IdToken: Number(args['id-ttl']),
    AccessToken: Number(args['id-ttl']),
    RefreshToken: 3600,
    Session: 3600,
    Grant: 3600,
    Interaction: 600,
    AuthorizationCode: 60,
  },
  issueRefreshToken: async (ctx, client) => client.grantTypeAllowed('refresh_token'),
  // A first-party client: its grant is made here, with no consent page.
  loadExistingGrant: async (ctx) => {
    const found = ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
    if (found) return ctx.oidc.provider.Grant.find(found);
    const grant = new ctx.oidc.provider.Grant({
      clientId: ctx.oidc.client.clientId,
      accountId: ctx.oidc.session.accountId,
    });
    grant.addOIDCScope('openid email profile offline_access');
    await grant.save();
    return grant;
  },
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
  cookies: { keys: ['sluice-test-provider-cookie-key'] },
});

// The login page: signs in as login_hint at once.
provider.use(async (ctx, next) => {
  if (!ctx.path.startsWith('/interaction/')) return next();
  const details = await provider.interactionDetails(ctx.req, ctx.res);
  const account = details.params.login_hint || 'alice';
  await provider.interactionFinished(ctx.req, ctx.res, { login: { accountId: account } }, { mergeWithLastSubmission: false });
});

server.on('request', provider.callback());
console.log(`listening ${issuer}`);
