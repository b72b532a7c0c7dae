package org.handled.interop;

import net.handle.hdllib.AbstractRequest;
import net.handle.hdllib.AbstractResponse;
import net.handle.hdllib.HandleException;
import net.handle.hdllib.HandleResolver;
import net.handle.hdllib.Interface;

/** The three transports of the native protocol, with the client library's raw send for each. */
public enum Proto {
    UDP(Interface.SP_HDL_UDP),
    TCP(Interface.SP_HDL_TCP),
    HTTP(Interface.SP_HDL_HTTP);

    /** Interface.SP_HDL_* code. */
    public final int code;

    Proto(int code) {
        this.code = code;
    }

    public int port(HandledServer s) {
        return this == HTTP ? s.httpPort : s.port;
    }

    /**
     * {@code sendHdlUdpRequest / sendHdlTcpRequest / sendHttpRequest(req, 127.0.0.1, port)}: one
     * message straight to the address (envelope version 2.3 unless the request sets one).
     */
    public AbstractResponse sendRaw(HandleResolver r, AbstractRequest req, HandledServer s) throws HandleException {
        switch (this) {
            case UDP:
                return r.sendHdlUdpRequest(req, HandledServer.LOOPBACK, port(s));
            case TCP:
                return r.sendHdlTcpRequest(req, HandledServer.LOOPBACK, port(s));
            case HTTP:
                return r.sendHttpRequest(req, HandledServer.LOOPBACK, port(s));
            default:
                throw new AssertionError(this);
        }
    }
}
