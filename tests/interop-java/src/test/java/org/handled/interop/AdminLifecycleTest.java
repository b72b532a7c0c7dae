package org.handled.interop;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.stream.Stream;
import net.handle.hdllib.AbstractMessage;
import net.handle.hdllib.AbstractResponse;
import net.handle.hdllib.AddValueRequest;
import net.handle.hdllib.AuthenticationInfo;
import net.handle.hdllib.CreateHandleRequest;
import net.handle.hdllib.CreateHandleResponse;
import net.handle.hdllib.DeleteHandleRequest;
import net.handle.hdllib.HandleResolver;
import net.handle.hdllib.HandleValue;
import net.handle.hdllib.ListHandlesRequest;
import net.handle.hdllib.ModifyValueRequest;
import net.handle.hdllib.RemoveValueRequest;
import net.handle.hdllib.ResolutionRequest;
import net.handle.hdllib.Util;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The stock {@link HandleResolver} administers handles on handled: create (with a non-public
 * HS_SECKEY, which the client encrypts inside a session), add, modify, remove values, list,
 * read non-public values back, delete; over TCP and HTTP; authenticated with the secret key, the
 * RSA key and a DSA key; with the default session tracker (DH session, MACs) and without it
 * (plain challenge/response for every request).
 */
class AdminLifecycleTest extends AdminTestBase {

    static Stream<Arguments> matrix() {
        List<Arguments> out = new ArrayList<>();
        for (Proto p : new Proto[] {Proto.TCP, Proto.HTTP}) {
            for (Auth a : Auth.values()) {
                for (boolean sessions : new boolean[] {true, false}) {
                    out.add(Arguments.of(p, a, sessions));
                }
            }
        }
        return out.stream();
    }

    @ParameterizedTest(name = "{0} {1} sessions={2}")
    @MethodSource("matrix")
    void lifecycle(Proto p, Auth a, boolean sessions) throws Exception {
        String ctx = p + " " + a + " sessions=" + sessions;
        String handle = ("TEST/java-" + p + "-" + a + "-" + (sessions ? "s" : "plain")).toLowerCase(Locale.ROOT);
        HandleResolver r = adminResolver(p, sessions);
        AuthenticationInfo ai = auth(a);

        HandleValue[] initial = {
            new HandleValue(1, "URL", "https://example.org/created"),
            secretKeyValue(300, "handle-secret"),
            adminValue(100, adminHandle, 0, true),
        };
        CreateHandleRequest create = new CreateHandleRequest(h(handle), initial, ai);
        AbstractResponse resp = send(r, create);
        assertAdmin(create, resp, AbstractMessage.RC_SUCCESS, ctx + " create");
        assertEquals(handle, Util.decodeString(assertInstanceOf(CreateHandleResponse.class, resp).handle), ctx);
        if (sessions) {
            assertNotNull(r.getSessionTracker().getSession(serverInfo(), ai), ctx + ": an authenticated session is tracked");
        } else {
            assertNull(r.getSessionTracker(), ctx);
        }
        CreateHandleRequest again = new CreateHandleRequest(h(handle), initial, ai);
        assertAdmin(again, send(r, again), AbstractMessage.RC_HANDLE_ALREADY_EXISTS, ctx + " create again");

        AddValueRequest add = new AddValueRequest(h(handle), new HandleValue(2, "EMAIL", "admin@example.org"), ai);
        assertAdmin(add, send(r, add), AbstractMessage.RC_SUCCESS, ctx + " add");
        ModifyValueRequest modify = new ModifyValueRequest(h(handle), new HandleValue(1, "URL", "https://example.org/moved"), ai);
        assertAdmin(modify, send(r, modify), AbstractMessage.RC_SUCCESS, ctx + " modify");

        // Public view (PO, anonymous): no secret key, moved URL, the new e-mail.
        ResolutionRequest publicReq = resolution(handle, null, true);
        HandleValue[] pub = assertResolved(publicReq, send(r, publicReq), ctx + " public resolve");
        assertArrayEquals(new int[] {1, 100, 2}, indexesOf(pub), ctx);
        assertEquals("https://example.org/moved", pub[0].getDataAsString(), ctx);
        // Authenticated view (PO clear): the secret key too (encrypted in a session).
        ResolutionRequest all = resolution(handle, ai, false);
        AbstractResponse allResp = send(r, all);
        assertAdmin(all, allResp, AbstractMessage.RC_SUCCESS, ctx + " authenticated resolve");
        HandleValue[] every = ((net.handle.hdllib.ResolutionResponse) allResp).getHandleValues();
        assertArrayEquals(new int[] {1, 300, 100, 2}, indexesOf(every), ctx);
        assertEquals("handle-secret", every[1].getDataAsString(), ctx);

        RemoveValueRequest remove = new RemoveValueRequest(h(handle), 2, ai);
        assertAdmin(remove, send(r, remove), AbstractMessage.RC_SUCCESS, ctx + " remove");
        RemoveValueRequest removeAgain = new RemoveValueRequest(h(handle), 2, ai);
        assertAdmin(removeAgain, send(r, removeAgain), AbstractMessage.RC_VALUES_NOT_FOUND, ctx + " remove again");

        int[] messages = {0};
        List<String> listed = sendList(r, new ListHandlesRequest(h("0.NA/TEST"), ai), messages);
        // Listed as created (matching stays case-insensitive).
        assertTrue(listed.contains(handle), ctx + ": listing " + listed);

        DeleteHandleRequest delete = new DeleteHandleRequest(h(handle), ai);
        assertAdmin(delete, send(r, delete), AbstractMessage.RC_SUCCESS, ctx + " delete");
        ResolutionRequest gone = resolution(handle, null, true);
        assertError(gone, send(r, gone), AbstractMessage.RC_HANDLE_NOT_FOUND, ctx + " resolve deleted");
    }

    /** More than 50 handles come back in several messages, each with CN but the last. */
    @Test
    void listingSpansSeveralMessages() throws Exception {
        HandleResolver r = adminResolver(Proto.TCP, true);
        AuthenticationInfo ai = auth(Auth.SECKEY);
        for (int i = 0; i < 120; i++) {
            CreateHandleRequest c = new CreateHandleRequest(h(String.format("TEST/many-%03d", i)),
                    new HandleValue[] {new HandleValue(1, "URL", "https://example.org/" + i)}, ai);
            assertAdmin(c, send(r, c), AbstractMessage.RC_SUCCESS, "create " + i);
        }
        for (Proto p : new Proto[] {Proto.TCP, Proto.HTTP}) {
            int[] messages = {0};
            List<String> listed = sendList(adminResolver(p, true), new ListHandlesRequest(h("0.NA/TEST"), ai), messages);
            assertEquals(120, listed.stream().filter(x -> x.startsWith("TEST/many-")).count(), p + ": " + listed);
            assertTrue(messages[0] >= 3, p + ": " + listed.size() + " handles in " + messages[0] + " messages");
        }
    }

    /** MINT appends a fresh UUID to the given text; OW replaces an existing handle. */
    @Test
    void mintAndOverwrite() throws Exception {
        HandleResolver r = adminResolver(Proto.TCP, true);
        AuthenticationInfo ai = auth(Auth.RSA);
        HandleValue[] v = {new HandleValue(1, "URL", "https://example.org/minted")};
        CreateHandleRequest mint = new CreateHandleRequest(h("TEST/doc-"), v, ai, true);
        AbstractResponse resp = send(r, mint);
        assertAdmin(mint, resp, AbstractMessage.RC_SUCCESS, "mint");
        String minted = Util.decodeString(((CreateHandleResponse) resp).handle);
        assertTrue(minted.matches("TEST/doc-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"), minted);

        CreateHandleRequest over = new CreateHandleRequest(h(minted), new HandleValue[] {new HandleValue(7, "EMAIL", "x@example.org")}, ai);
        over.overwriteWhenExists = true;
        AbstractResponse o = send(r, over);
        assertAdmin(over, o, AbstractMessage.RC_SUCCESS, "overwrite");
        assertTrue(o.overwriteWhenExists, "OW set in the response when a handle was replaced");
        ResolutionRequest check = resolution(minted, null, true);
        HandleValue[] now = assertResolved(check, send(r, check), "after overwrite");
        assertArrayEquals(new int[] {7}, indexesOf(now));
    }

    static ResolutionRequest resolution(String handle, AuthenticationInfo ai, boolean publicOnly) {
        ResolutionRequest req = new ResolutionRequest(Util.encodeString(handle), null, null, ai);
        req.ignoreRestrictedValues = publicOnly;
        return req;
    }
}
