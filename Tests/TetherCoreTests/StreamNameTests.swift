import Testing
import TetherCore

@Suite("Stream names")
struct StreamNameTests {
    /// A stream's category is what `split_part(stream, '-', 1)` gives in PostgreSQL (the log reader keeps rows
    /// by it, and the replay's count selects them with it): the bytes before the first `-`, even one that a
    /// combining mark joins into a character with what follows.
    @Test(arguments: [
        ("user-c86e950d-2311-46da-8eab-ba4945b68939", "user"), ("nodash", "nodash"), ("-x", ""), ("a-b-c", "a"),
        ("été-1", "été"), ("a-\u{301}b", "a"), ("", ""),
    ])
    func theCategoryIsTheNameBeforeTheFirstDash(name: String, category: String) {
        #expect(StreamName(name).category == category)
    }
}
