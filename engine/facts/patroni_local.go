package facts

// PatroniLocalPy is the part every Patroni REST helper shares (the
// discovery's GET here, a module's restart calls): a script defines
// refuse(msg), which prints its refusal and exits, and who (a prefix
// naming the member, or empty), then this. local_addresses(url) is the
// URL, its host, its port and the addresses it names, refusing unless
// every one is this host's own (loopback, or one a socket binds to:
// nothing is sent). The opener make_opener(tls, name) builds follows no
// redirect (Redirected is raised: the Authorization header never leaves
// for another URL) and uses no proxy; over HTTPS the server's certificate is
// checked against the CA and for the URL's host name (PatroniTLS), while
// the connection goes to the checked address; tls_refusal(e) says why an
// exception was a certificate failure (None otherwise).
const PatroniLocalPy = `import sys, base64, json, http.client, ipaddress, socket, ssl, urllib.request, urllib.error, urllib.parse
def nonlocal_bind():
    for f in ('/proc/sys/net/ipv4/ip_nonlocal_bind', '/proc/sys/net/ipv6/ip_nonlocal_bind'):
        try:
            with open(f) as fh:
                if fh.read().strip() != '0':
                    return True
        except OSError:
            pass
    return False
def local_addresses(url):
    u = urllib.parse.urlsplit(url)
    host = u.hostname or ''
    try:
        port = u.port or (443 if u.scheme == 'https' else 80)
        infos = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)
    except Exception as e:
        refuse(who + 'REST API address %r: %s: %s' % (host, type(e).__name__, e))
    addrs = []
    for fam, _, _, _, sa in infos:
        ip = sa[0]
        local = ipaddress.ip_address(ip.split('%')[0]).is_loopback
        if not local and not nonlocal_bind():
            # bind succeeds only for an address of this host: nothing is sent.
            s = socket.socket(fam, socket.SOCK_STREAM)
            try:
                s.bind((ip, 0) + tuple(sa[2:]))
                local = True
            except OSError:
                pass
            finally:
                s.close()
        if not local:
            refuse(who + 'REST API address %r (%s) is not on this host: pgtune calls only the member\'s own API' % (host, ip))
        if (fam, ip) not in addrs:
            addrs.append((fam, ip))
    return u, host, port, addrs
def address_url(u, port, fam, ip, path, query):
    target = '[%s]' % ip if fam == socket.AF_INET6 else ip
    return urllib.parse.urlunsplit((u.scheme, '%s:%d' % (target, port), path, query, ''))
class Redirected(Exception):
    pass
class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        raise Redirected('HTTP %d redirect to %r refused' % (code, newurl))
def make_opener(tls, name):
    # tls: PatroniTLS.PyArg(); name: the URL's host, the one the
    # certificate must carry (the connection goes to a checked address).
    try:
        if tls.get('insecure'):
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        else:
            ctx = ssl.create_default_context(cafile=tls.get('cafile') or None)
        if tls.get('certfile'):
            ctx.load_cert_chain(tls['certfile'], tls.get('keyfile') or None)
    except Exception as e:
        refuse(who + 'REST API over HTTPS: the CA, certificate or key patroni.yml names cannot be used: %s: %s' % (type(e).__name__, e))
    class Checked(http.client.HTTPSConnection):
        def connect(self):
            http.client.HTTPConnection.connect(self)
            self.sock = self._context.wrap_socket(self.sock, server_hostname=name)
    class Handler(urllib.request.HTTPSHandler):
        def https_open(self, req):
            return self.do_open(Checked, req, context=ctx)
    return urllib.request.build_opener(urllib.request.ProxyHandler({}), NoRedirect, Handler)
def tls_refusal(e):
    # A certificate that does not check out is a refusal, never retried
    # unchecked.
    if isinstance(e, urllib.error.URLError) and isinstance(e.reason, ssl.SSLError):
        e = e.reason
    if isinstance(e, ssl.SSLError):
        return who + 'REST API over HTTPS: %s: %s (pgtune checks its certificate against ctl.cacert or restapi.cafile and the host name in restapi.connect_address)' % (type(e).__name__, e)
    return None
`
