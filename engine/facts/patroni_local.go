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
//
// Local is not enough: any user may listen on an address and port the
// member's API does not hold (its other address family, say). Once
// connected, before a byte is sent (the Authorization header included),
// check_peer finds the server's end of the connection in /proc/net/tcp
// (tcp6): the socket a listener accepted carries the listener's uid, which
// must be ours, the cluster owner's (the helper runs as them; Patroni runs
// as the cluster owner).
const PatroniLocalPy = `import os, sys, time, base64, json, http.client, ipaddress, socket, ssl, urllib.request, urllib.error, urllib.parse
def tcp_key(fam, ip, port):
    b = socket.inet_pton(fam, ip.split('%')[0])
    # each 32-bit word in host order, as the kernel prints it
    return ''.join('%08X' % int.from_bytes(b[i:i+4], sys.byteorder) for i in range(0, len(b), 4)) + ':%04X' % port
def server_uid(sock):
    fam = sock.family
    mine, theirs = sock.getsockname(), sock.getpeername()
    local, remote = tcp_key(fam, theirs[0], theirs[1]), tcp_key(fam, mine[0], mine[1])
    table = '/proc/net/tcp6' if fam == socket.AF_INET6 else '/proc/net/tcp'
    with open(table) as fh:
        next(fh)
        for line in fh:
            f = line.split()
            # established (01): the server's end, accepted
            if len(f) > 7 and f[1] == local and f[2] == remote and f[3] == '01':
                return int(f[7])
    return None
def check_peer(sock):
    uid = None
    for _ in range(100):  # the server's end may take a moment to be established
        uid = server_uid(sock)
        if uid is not None:
            break
        time.sleep(0.01)
    if uid != os.getuid():
        peer = sock.getpeername()
        sock.close()
        said = 'uid %d' % uid if uid is not None else 'a process pgtune cannot see'
        refuse(who + 'REST API at %s port %d is served by %s, not the cluster owner (uid %d): nothing sent to it' % (peer[0], peer[1], said, os.getuid()))
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
            check_peer(self.sock)
            self.sock = self._context.wrap_socket(self.sock, server_hostname=name)
    class Handler(urllib.request.HTTPSHandler):
        def https_open(self, req):
            return self.do_open(Checked, req, context=ctx)
    class CheckedPlain(http.client.HTTPConnection):
        def connect(self):
            http.client.HTTPConnection.connect(self)
            check_peer(self.sock)
    class PlainHandler(urllib.request.HTTPHandler):
        def http_open(self, req):
            return self.do_open(CheckedPlain, req)
    return urllib.request.build_opener(urllib.request.ProxyHandler({}), NoRedirect, Handler, PlainHandler)
def tls_refusal(e):
    # A certificate that does not check out is a refusal, never retried
    # unchecked.
    if isinstance(e, urllib.error.URLError) and isinstance(e.reason, ssl.SSLError):
        e = e.reason
    if isinstance(e, ssl.SSLError):
        return who + 'REST API over HTTPS: %s: %s (pgtune checks its certificate against ctl.cacert or restapi.cafile and the host name in restapi.connect_address)' % (type(e).__name__, e)
    return None
`
