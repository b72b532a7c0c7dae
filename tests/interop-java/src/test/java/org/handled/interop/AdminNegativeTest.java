package org.handled.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;

import java.security.KeyPairGenerator;
import net.handle.hdllib.AbstractMessage;
import net.handle.hdllib.AbstractResponse;
import net.handle.hdllib.AddValueRequest;
import net.handle.hdllib.AuthenticationInfo;
import net.handle.hdllib.ChallengeAnswerRequest;
import net.handle.hdllib.ChallengeResponse;
import net.handle.hdllib.ClientSessionTracker;
import net.handle.hdllib.ClientSideSessionInfo;
import net.handle.hdllib.CreateHandleRequest;
import net.handle.hdllib.Encoder;
import net.handle.hdllib.HandleResolver;
import net.handle.hdllib.HandleValue;
import net.handle.hdllib.ListHandlesRequest;
import net.handle.hdllib.ModifyValueRequest;
import net.handle.hdllib.PublicKeyAuthenticationInfo;
import net.handle.hdllib.ResolutionRequest;
import net.handle.hdllib.SecretKeyAuthenticationInfo;
import net.handle.hdllib.SessionSetupInfo;
import net.handle.hdllib.ValueReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The negative matrix: each refusal with the response code a Handle.Net server gives. Refusals
 * that the stock client sees in its normal flow go through {@code sendRequestToServer}; the
 * session attacks (tampered MAC, replayed counter, expired session) and the replayed challenge
 * answer are sent raw with {@code sendHdlTcpRequest}, since the client would never produce them.
 */
class AdminNegativeTest extends AdminTestBase {

    private static HandleValue[] oneUrl() {
        return new HandleValue[] {new HandleValue(1, "URL", "https://example.org/neg")};
    }

    @ParameterizedTest(name = "sessions={0}")
    @ValueSource(booleans = {true, false})
    void wrongSecretIsRefused(boolean sessions) throws Exception {
        AuthenticationInfo wrong = new SecretKeyAuthenticationInfo(adminHandle, SECKEY_INDEX, h("not-the-secret"));
        CreateHandleRequest c = new CreateHandleRequest(h("TEST/neg-secret"), oneUrl(), wrong);
        assertAdmin(c, send(adminResolver(Proto.TCP, sessions), c), AbstractMessage.RC_AUTHENTICATION_FAILED, "wrong secret");
    }

    @ParameterizedTest(name = "sessions={0}")
    @ValueSource(booleans = {true, false})
    void wrongPrivateKeyIsRefused(boolean sessions) throws Exception {
        KeyPairGenerator g = KeyPairGenerator.getInstance("RSA");
        g.initialize(2048);
        AuthenticationInfo wrong = new PublicKeyAuthenticationInfo(adminHandle, RSA_INDEX, g.generateKeyPair().getPrivate());
        CreateHandleRequest c = new CreateHandleRequest(h("TEST/neg-key"), oneUrl(), wrong);
        assertAdmin(c, send(adminResolver(Proto.HTTP, sessions), c), AbstractMessage.RC_AUTHENTICATION_FAILED, "wrong key");
    }

    /** An admin whose only grant is LIST_HANDLES may list but not create. */
    @Test
    void adminWithoutThePermissionBit() throws Exception {
        HandleResolver root = adminResolver(Proto.TCP, true);
        AuthenticationInfo rootAuth = auth(Auth.SECKEY);
        createAdmin(root, rootAuth, "TEST/LISTER", "lister-secret");
        AddValueRequest grant = new AddValueRequest(h("0.NA/TEST"), adminValue(110, h("TEST/LISTER"), 300, false), rootAuth);
        assertAdmin(grant, send(root, grant), AbstractMessage.RC_SUCCESS, "grant list only");

        AuthenticationInfo lister = new SecretKeyAuthenticationInfo(h("TEST/LISTER"), 300, h("lister-secret"));
        HandleResolver r = adminResolver(Proto.TCP, true);
        sendList(r, new ListHandlesRequest(h("0.NA/TEST"), lister), new int[1]);
        CreateHandleRequest c = new CreateHandleRequest(h("TEST/by-lister"), oneUrl(), lister);
        assertAdmin(c, send(r, c), AbstractMessage.RC_INVALID_ADMIN, "create without ADD_HANDLE");
    }

    /** Admin rights through an HS_VLIST group end when the member is taken out of the list. */
    @Test
    void groupMemberRemovedFromVlist() throws Exception {
        HandleResolver root = adminResolver(Proto.TCP, true);
        AuthenticationInfo rootAuth = auth(Auth.SECKEY);
        createAdmin(root, rootAuth, "TEST/MEMBER", "member-secret");
        CreateHandleRequest group = new CreateHandleRequest(h("TEST/GROUP"),
                new HandleValue[] {vlist(200, new ValueReference(h("TEST/MEMBER"), 300))}, rootAuth);
        assertAdmin(group, send(root, group), AbstractMessage.RC_SUCCESS, "create group");
        AddValueRequest grant = new AddValueRequest(h("0.NA/TEST"), adminValue(111, h("TEST/GROUP"), 200, true), rootAuth);
        assertAdmin(grant, send(root, grant), AbstractMessage.RC_SUCCESS, "grant the group");

        AuthenticationInfo member = new SecretKeyAuthenticationInfo(h("TEST/MEMBER"), 300, h("member-secret"));
        HandleResolver r = adminResolver(Proto.HTTP, true);
        CreateHandleRequest ok = new CreateHandleRequest(h("TEST/by-member-1"), oneUrl(), member);
        assertAdmin(ok, send(r, ok), AbstractMessage.RC_SUCCESS, "member creates");

        ModifyValueRequest drop = new ModifyValueRequest(h("TEST/GROUP"), vlist(200, new ValueReference(h("TEST/SOMEONE"), 300)), rootAuth);
        assertAdmin(drop, send(root, drop), AbstractMessage.RC_SUCCESS, "remove member from group");
        CreateHandleRequest refused = new CreateHandleRequest(h("TEST/by-member-2"), oneUrl(), member);
        assertAdmin(refused, send(r, refused), AbstractMessage.RC_INVALID_ADMIN, "former member creates");
    }

    @Test
    void tamperedMacIsRefused() throws Exception {
        ClientSideSessionInfo s = authenticatedSession(new ClientSessionTracker(new SessionSetupInfo()));
        ResolutionRequest req = inSession(s);
        req.signature[req.signature.length - 1] ^= 1;
        AbstractResponse resp = Proto.TCP.sendRaw(newResolver(), req, server);
        assertResponse(req, resp, AbstractMessage.RC_INVALID_SESSION_KEY, "tampered MAC");
    }

    @Test
    void replayedSessionCounterIsRefused() throws Exception {
        ClientSideSessionInfo s = authenticatedSession(new ClientSessionTracker(new SessionSetupInfo()));
        ResolutionRequest req = inSession(s);
        HandleResolver raw = newResolver();
        assertResponse(req, Proto.TCP.sendRaw(raw, req, server), AbstractMessage.RC_SUCCESS, "first use");
        assertResponse(req, Proto.TCP.sendRaw(raw, req, server), AbstractMessage.RC_SESSION_MESSAGE_REJECTED, "replay");
    }

    /** A challenge answer is good for one use. */
    @Test
    void replayedAnswerIsRefused() throws Exception {
        HandleResolver raw = newResolver();
        AuthenticationInfo ai = auth(Auth.SECKEY);
        CreateHandleRequest req = new CreateHandleRequest(h("TEST/neg-replay"), oneUrl(), ai);
        req.majorProtocolVersion = 2;
        req.minorProtocolVersion = 10;
        req.setSupportedProtocolVersion();
        AbstractResponse first = Proto.TCP.sendRaw(raw, req, server);
        ChallengeResponse challenge = assertInstanceOf(ChallengeResponse.class, first, describe(first));
        ChallengeAnswerRequest answer = new ChallengeAnswerRequest(req, challenge, ai);
        answer.requestId = randomId();
        AbstractResponse done = Proto.TCP.sendRaw(raw, answer, server);
        assertAdmin(req, done, AbstractMessage.RC_SUCCESS, "answer");
        AbstractResponse again = Proto.TCP.sendRaw(raw, answer, server);
        assertEquals(AbstractMessage.RC_AUTHEN_TIMEOUT, again.responseCode, "replayed answer: " + describe(again));
    }

    /** A session idle past its timeout is gone (500); the stock client then sets up a new one. */
    @Test
    void expiredSessionIsRefused() throws Exception {
        SessionSetupInfo shortLived = new SessionSetupInfo();
        shortLived.timeout = 1;
        ClientSessionTracker tracker = new ClientSessionTracker(shortLived);
        ClientSideSessionInfo s = authenticatedSession(tracker);
        Thread.sleep(2500);
        ResolutionRequest req = inSession(s);
        assertResponse(req, Proto.TCP.sendRaw(newResolver(), req, server), AbstractMessage.RC_SESSION_TIMEOUT, "expired session");

        HandleResolver r = adminResolver(Proto.TCP, true);
        r.setSessionTracker(tracker);
        CreateHandleRequest c = new CreateHandleRequest(h("TEST/after-expiry"), oneUrl(), auth(Auth.SECKEY));
        assertAdmin(c, send(r, c), AbstractMessage.RC_SUCCESS, "new session after expiry");
    }

    /** Runs one admin request through a resolver with {@code tracker}; returns its session. */
    private static ClientSideSessionInfo authenticatedSession(ClientSessionTracker tracker) throws Exception {
        HandleResolver r = adminResolver(Proto.TCP, true);
        r.setSessionTracker(tracker);
        AuthenticationInfo ai = auth(Auth.SECKEY);
        CreateHandleRequest c = new CreateHandleRequest(h("TEST/sess-" + randomId()), oneUrl(), ai);
        assertAdmin(c, send(r, c), AbstractMessage.RC_SUCCESS, "authenticating request");
        ClientSideSessionInfo s = tracker.getSession(serverInfo(), ai);
        assertNotNull(s, "session tracked after the first admin request");
        return s;
    }

    /** A public resolution request MACed in session {@code s}, as the client would send it. */
    private static ResolutionRequest inSession(ClientSideSessionInfo s) throws Exception {
        ResolutionRequest req = new ResolutionRequest(h("TEST/1"), null, null, null);
        req.sessionInfo = s;
        req.sessionId = s.sessionId;
        req.requestId = randomId();
        req.majorProtocolVersion = s.getMajorProtocolVersion();
        req.minorProtocolVersion = s.getMinorProtocolVersion();
        req.setSupportedProtocolVersion();
        req.signMessageForSession();
        return req;
    }

    private static void createAdmin(HandleResolver root, AuthenticationInfo rootAuth, String handle, String secretText) throws Exception {
        CreateHandleRequest c = new CreateHandleRequest(h(handle),
                new HandleValue[] {adminValue(100, h(handle), 300, true), secretKeyValue(300, secretText)}, rootAuth);
        assertAdmin(c, send(root, c), AbstractMessage.RC_SUCCESS, "create admin " + handle);
    }

    private static HandleValue vlist(int index, ValueReference... members) {
        return new HandleValue(index, "HS_VLIST", Encoder.encodeValueReferenceList(members));
    }

}
