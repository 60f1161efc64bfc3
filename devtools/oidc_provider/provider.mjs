// A certified OpenID provider for the single sign-on tests: panva's oidc-provider, whose
// people and groups are an LDAP directory's (ldapts), with a log-in form of its own.
//
//   node provider.mjs CONFIG.json
//
// CONFIG: {port, issuer, client: {client_id, client_secret, redirect_uris,
// post_logout_redirect_uris}, ldap: {url, bind_dn, bind_password, user_base, group_base}}.
// A person is their entry's entryUUID (the subject); the claims are uid
// (preferred_username), mail, givenName, sn, cn, and the cn of every groupOfNames that
// lists them (groups, for the `groups` scope). Started and stopped by
// devtools/openid_provider.py; prints "listening" once it answers.

import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { AndFilter, Client, EqualityFilter } from 'ldapts';
import Provider, { interactionPolicy } from 'oidc-provider';

const config = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const ldap = config.ldap;

function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

async function withDirectory(work) {
  const client = new Client({ url: ldap.url, timeout: 10000, connectTimeout: 10000 });
  try {
    await client.bind(ldap.bind_dn, ldap.bind_password);
    return await work(client);
  } finally {
    await client.unbind();
  }
}

async function findPerson(client, attribute, value) {
  const { searchEntries } = await client.search(ldap.user_base, {
    scope: 'sub',
    filter: new AndFilter({
      filters: [
        new EqualityFilter({ attribute: 'objectClass', value: 'person' }),
        new EqualityFilter({ attribute, value }),
      ],
    }),
    attributes: ['uid', 'entryUUID', 'mail', 'givenName', 'sn', 'cn'],
    sizeLimit: 2,
  });
  return searchEntries.length === 1 ? searchEntries[0] : null;
}

async function groupsOf(client, dn) {
  const { searchEntries } = await client.search(ldap.group_base, {
    scope: 'sub',
    filter: new EqualityFilter({ attribute: 'member', value: dn }),
    attributes: ['cn'],
  });
  return searchEntries.map((entry) => String(entry.cn));
}

async function findAccount(ctx, sub) {
  const found = await withDirectory(async (client) => {
    const person = await findPerson(client, 'entryUUID', sub);
    return person && { person, groups: await groupsOf(client, person.dn) };
  });
  if (!found) return undefined;
  const { person, groups } = found;
  return {
    accountId: sub,
    async claims() {
      return {
        sub,
        preferred_username: String(person.uid),
        name: String(person.cn),
        given_name: String(person.givenName),
        family_name: String(person.sn),
        email: String(person.mail),
        email_verified: true,
        groups,
      };
    },
  };
}

// The person whose password this is, checked by binding as them; null otherwise.
async function checkPassword(username, password) {
  if (!username || !password) return null;
  const person = await withDirectory((client) => findPerson(client, 'uid', username));
  if (!person) return null;
  const asPerson = new Client({ url: ldap.url, timeout: 10000, connectTimeout: 10000 });
  try {
    await asPerson.bind(person.dn, password);
    return String(person.entryUUID);
  } catch {
    return null;
  } finally {
    await asPerson.unbind();
  }
}

const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const claims = {
  openid: ['sub'],
  profile: ['name', 'given_name', 'family_name', 'preferred_username'],
  email: ['email', 'email_verified'],
  groups: ['groups'],
};

function page(title, body) {
  return `<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(title)}</title></head>
<body><main><h1>${escapeHtml(title)}</h1>${body}</main></body></html>`;
}

// A session whose person the directory no longer has is no session, as at a site's
// provider: a sign-in shows the form again, and a silent one (prompt=none, the portal's
// re-check of its session) answers login_required. Without this check the provider
// failed such a request with a server error.
const policy = interactionPolicy.base();
policy.get('login').checks.add(
  new interactionPolicy.Check(
    'account_gone',
    'the signed-in person is no longer in the directory',
    'login_required',
    (ctx) => Boolean(ctx.oidc.session.accountId && !ctx.oidc.account),
  ),
);

const provider = new Provider(config.issuer, {
  interactions: { policy, url: (ctx, interaction) => `/interaction/${interaction.uid}` },
  clients: [
    {
      ...config.client,
      grant_types: ['authorization_code'],
      response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_post',
    },
  ],
  jwks: { keys: [{ ...privateKey.export({ format: 'jwk' }), kid: 'test-key', alg: 'RS256', use: 'sig' }] },
  cookies: { keys: [randomBytes(32).toString('hex')] },
  claims,
  findAccount,
  // Every authorization request must carry a PKCE challenge (S256).
  pkce: { required: () => true },
  features: {
    devInteractions: { enabled: false },
    rpInitiatedLogout: {
      enabled: true,
      async logoutSource(ctx, form) {
        ctx.body = page(
          'Sign out of the test provider?',
          `${form}<button autofocus type="submit" form="op.logoutForm" value="yes" name="logout">Yes, sign out</button>`,
        );
      },
      async postLogoutSuccessSource(ctx) {
        ctx.body = page('Signed out', '<p>You are signed out of the test provider.</p>');
      },
    },
  },
  // The portal is this provider's own first-party client: no consent page.
  async loadExistingGrant(ctx) {
    const grantId = ctx.oidc.result?.consent?.grantId || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
    if (grantId) return ctx.oidc.provider.Grant.find(grantId);
    const grant = new ctx.oidc.provider.Grant({
      clientId: ctx.oidc.client.clientId,
      accountId: ctx.oidc.session.accountId,
    });
    grant.addOIDCScope(Object.keys(claims).join(' '));
    await grant.save();
    return grant;
  },
  async renderError(ctx, out) {
    ctx.type = 'html';
    ctx.body = page('Sign-in error', Object.entries(out).map(([k, v]) => `<p>${escapeHtml(k)}: ${escapeHtml(v)}</p>`).join(''));
  },
});

function loginForm(uid, error) {
  return page(
    'Sign in to the test provider',
    `${error ? `<p role="alert">${escapeHtml(error)}</p>` : ''}
<form method="post" action="/interaction/${escapeHtml(uid)}/login">
<label for="username">Directory user name</label><input id="username" name="username" autofocus>
<label for="password">Directory password</label><input id="password" name="password" type="password">
<button type="submit">Sign in</button></form>`,
  );
}

async function formBody(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}

// The interaction routes: the log-in form and its answer.
provider.use(async (ctx, next) => {
  const match = ctx.path.match(/^\/interaction\/([^/]+)(\/login)?$/);
  if (!match) return next();
  const details = await provider.interactionDetails(ctx.req, ctx.res);
  if (details.prompt.name !== 'login') {
    ctx.throw(400, `unexpected prompt ${details.prompt.name}`);
  }
  if (ctx.method === 'GET' && !match[2]) {
    ctx.type = 'html';
    ctx.body = loginForm(details.uid, null);
    return undefined;
  }
  if (ctx.method !== 'POST' || !match[2]) ctx.throw(405);
  const form = await formBody(ctx.req);
  const accountId = await checkPassword(form.get('username'), form.get('password'));
  if (!accountId) {
    ctx.type = 'html';
    ctx.body = loginForm(details.uid, 'Wrong user name or password.');
    return undefined;
  }
  const to = await provider.interactionResult(ctx.req, ctx.res, { login: { accountId } }, { mergeWithLastSubmission: false });
  ctx.redirect(to);
  return undefined;
});

const server = provider.listen(config.port, '127.0.0.1', () => {
  console.log(`listening on ${config.port} as ${config.issuer}`);
});
for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => {
    server.close(() => process.exit(0));
    server.closeAllConnections(); // a browser's kept-alive ones too
  });
}
