package org.handled.interop;

/** How a test hands a request to the client library. */
public enum Route {
    /** {@code resolver.sendRequestToSite(req, site, protocol)}: the one protocol, no fallback. */
    SITE_FORCED,
    /** {@code setPreferredProtocols({protocol})} then {@code sendRequestToSite(req, site)}. */
    SITE_PREFERRED,
    /** {@code setPreferredProtocols({protocol})} then {@code sendRequestToServer(req, site, server)}. */
    SERVER_PREFERRED,
    /** {@code sendHdlUdpRequest / sendHdlTcpRequest / sendHttpRequest(req, 127.0.0.1, port)}. */
    RAW
}
