"""What people ask, as data: each intent's words and phrases, and the tools that answer it.

The planner is data-driven: reading a query finds intents by these words (typos forgiven), and
planning binds each intent's tools to what the query names through the tools' published input
schemas. A source added later is planned by adding an intent (or a tool to one) here, not code.

Words are single lower-case tokens, matched after typo correction; phrases are matched as written
(lower case, single spaces) and may span words that mean something else alone ("give back").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sources.identifiers import CUSTOMER_ID
from sources.products import PRODUCTS

__all__ = [
    "GENERIC_WORDS",
    "INTENTS",
    "NOT_NAMES",
    "PRODUCT_WORDS",
    "REFUND_PAID",
    "STOPWORDS",
    "SYMPTOM_WORDS",
    "TOPIC_WORDS",
    "Intent",
    "intent_named",
    "vocabulary",
    "words_of",
]


@dataclass(frozen=True)
class Intent:
    """A kind of question, the words that ask it, and the tools that answer it, best first."""

    name: str
    words: frozenset[str]
    tools: tuple[str, ...]  # "source.tool" each planned; "a.x | b.y": the first that can be bound
    # When none of its tools can take what the query names: what was asked, and what to give.
    unanswered: str = ""
    ask_for: str = ""
    phrases: tuple[str, ...] = ()
    # A search word this intent always adds to a text search ("refund" for "money back").
    default_topic: str = ""
    # Its words are also worth searching for (a refund, a warranty), not only a choice of source.
    topical: bool = False
    # A phrasal verb whose particle may stand apart ("send the kettle back"): verbs, particle, and the
    # word a search for it uses.
    separable: tuple[tuple[str, ...], str, str] | None = None
    # Nouns that ask this intent only where its tools have something to take ("the customer of
    # ORD-10023" asks who; "the customer wants a refund" does not): never reported as unanswered.
    weak_words: frozenset[str] = frozenset()


def words_of(text: str) -> frozenset[str]:
    """The words of a space-separated list (the data below reads as prose, not as quoted lists)."""
    return frozenset(text.split())


INTENTS: tuple[Intent, ...] = (
    # "customer" and "account" alone are nouns in most questions ("the customer is furious"):
    # asking *who* someone is takes one of these phrases.
    Intent(
        "customer",
        words_of("profile"),
        ("customers.customer_lookup",),
        weak_words=words_of("customer customers account accounts contact owner buyer purchaser"),
        phrases=(
            "who is",
            "who's",
            "whos",
            "who placed",
            "who ordered",
            "who bought",
            "whose order",
            "which customer",
            "customer details",
            "contact details",
            "account details",
            "customer info",
            "look up",
            "lookup",
            "sign up",
            "signed up",
            "joined us",
            "become a customer",
            "became a customer",
        ),
        unanswered="a customer was asked about",
        ask_for=f"name them by email, {CUSTOMER_ID.shape} or name, or name one of their orders",
    ),
    Intent(
        "orders",
        words_of(
            "order orders ordered purchase purchases purchased bought buy buys buying deliveries "
            "shipments shipment shop shops shopped shopping"
        ),
        ("orders.search_orders | orders.get_order",),
        phrases=("turn up", "turned up", "show up", "shown up"),
        unanswered="orders were asked about",
        ask_for=f"name the customer (an email or {CUSTOMER_ID.shape}) or the order, e.g. 'orders of CUST-00042'",
    ),
    Intent(
        "tickets",
        words_of("ticket tickets complaint complaints complain complained issues contacted chasing chased"),
        ("tickets.search_tickets",),
        phrases=(
            "contacted us",
            "raised an issue",
            "support case",
            "support cases",
            "support request",
            "support requests",
            "been on to us",
            "been onto us",
            "been in touch",
            "got in touch",
            "in contact with us",
            "been in contact",
            "got in contact",
            "get in contact",
            "what's been said",
        ),
        unanswered="support tickets were asked about",
        ask_for="name the customer, the order, or what the tickets are about, e.g. 'open tickets of CUST-00042'",
    ),
    Intent(
        "invoices",
        words_of("invoice invoices invoiced billing billed payment payments paid charged charges charge"),
        ("billing.list_invoices",),
        # "did they pay": asks of invoices where there is someone's to list, not in "pay £20 back"
        weak_words=words_of("pay pays paying"),
        unanswered="invoices were asked about",
        ask_for="name the customer or an order, e.g. 'invoices of CUST-00042'",
    ),
    Intent(
        "refund",
        words_of(
            "refund refunds refunded refundable refunding reimburse reimbursed reimbursement compensation compensate "
            "repay repaid repayment "
            "goodwill"
        ),
        ("billing.refund_eligibility", "kb.search_policies"),
        phrases=(
            "money back",
            "give back",
            "give them back",
            "give her back",
            "give him back",
            "pay back",
            "paid back",
            "get back",
            "back for",
            "cash back",
            "money returned",
        ),
        default_topic="refund",
        topical=True,
        unanswered="a refund was asked about",
        ask_for="name the order and the amount, e.g. 'refund £45 on ORD-10031'",
    ),
    Intent(
        "policies",
        words_of(
            "policy policies rule rules allowed allow qualify qualifies eligible eligibility warranty "
            "guarantee returns return gdpr erasure escalation escalate guideline guidelines "
            "shipping procedure process entitled article articles kb"
        ),
        ("kb.search_policies | kb.related_policies",),
        phrases=("what do we do", "how do we handle", "how should we"),
        # "send it back", "post the cafetiere back": a thing returned, whatever stands between.
        separable=(("send", "post", "ship", "bring", "take", "mail", "courier"), "back", "return"),
        topical=True,
        unanswered="a policy was asked about",
        ask_for="say which, e.g. 'policy on damaged items' or a KB id such as KB-REFUNDS",
    ),
    Intent(
        "everything",
        words_of("everything overview"),
        (
            "customers.customer_lookup",
            "orders.search_orders",
            "tickets.search_tickets",
            "billing.list_invoices",
        ),
        phrases=(
            "all about",
            "full picture",
            "all we have",
            "whatever we have",
            "everything we have",
            "anything on",
            "all you have",
            "the lot",
            "whole history",
            "full history",
        ),
        unanswered="everything about someone was asked",
        ask_for="name the customer, e.g. 'everything about CUST-00042'",
    ),
)

# Things the demo world sells, and what goes wrong with them: a query naming them with no customer
# or order is researched as a full-text ticket search and a policy search.
PRODUCT_WORDS = words_of(
    "espresso machine machines grinder grinders kettle kettles beans jug jugs frother frothing cafetiere "
    "descaling tablets cups brew scale tamper knock box appliance appliances item items parcel package "
    "product products carafe filter lid handle pump hopper"
) | frozenset(  # and every word of what the shop sells (sources.products)
    word for name, _ in PRODUCTS for word in re.findall(r"[a-z]+", name.lower()) if len(word) > 2
)
SYMPTOM_WORDS = words_of(
    "damaged broken cracked crack leaking leaks leak late missing wrong scratched dented faulty defective "
    "delayed lost stolen smashed dead fault faults stopped"
)
# Words worth searching for in policies and tickets, beyond the intents' own.
TOPIC_WORDS = (
    PRODUCT_WORDS
    | SYMPTOM_WORDS
    | words_of(
        "delivery deliveries replacement exchange manager limit window days restricted vip erased data protection "
        "arrival arrived transit photos colour color tracking address vat"
    )
)

STOPWORDS = words_of(
    "a an and are as at be been by can could do does did for from has have had how i in is it its of on or "
    "our the their them they this that to was we were what whether which who why will with would any all "
    "about me my us you your please pls plz thanks thank check show tell give get find see look list pull "
    "up some there here just also need needs want wants know let lets is's it's what's whats whats "
    "hi hello hey status going on happening happened latest recent recently new open opened closed pending "
    "there's theres did does doesn't not no yes much many more most than then so if into over under "
    "out she he her his him hers they're we're i'm im should shall might must being was were got has "
    "investigate investigation research summary summarise summarize info information anything something "
    "same other another one two three both each per via re regarding regards concerning touching case's customer's "
    "quick quickly asap urgent today yesterday now currently still ever again after before since until till "
    "between during last past this next week weeks month months year years day days ago back placed may "
    "made make when where whose has been thing things older linked related connected links link"
)

# Words that ask for a policy without saying which: they choose the source, not the search text.
GENERIC_WORDS = words_of(
    "policy policies rule rules allowed allow qualify qualifies eligible eligibility guideline guidelines "
    "procedure process entitled"
)

# First names that are also everyday English words: never read as a person in a query.
NOT_NAMES = words_of(
    "will may june april august mark bill grant faith hope rose jack guy joy ray summer dawn chase drew "
    "hunter page art case lane king amber crystal sterling destiny star sunny iris ruby jade ivy autumn "
    "harry rich price van miles reed wade gene angel carol major paris jordan sky order"
)


def intent_named(name: str) -> Intent:
    """The intent of that name."""
    return next(each for each in INTENTS if each.name == name)


def vocabulary() -> frozenset[str]:
    """Every word a typo may be corrected to: the intents' words and the topic words."""
    return TOPIC_WORDS.union(*(intent.words | intent.weak_words for intent in INTENTS))


# --- what is asked in other words: examples for the semantic matcher (coordinator.planning.meaning) -----------

# Phrasings of each intent that its keywords do not catch. A clause whose words the keywords leave
# unexplained is compared with every example; the intent of the nearest one is taken when it is
# near enough (``meaning.THRESHOLD``) and shares a word's meaning with the clause, and the clause is
# reported as not understood otherwise. So every example holds a word that is not a function word.
EXAMPLES: dict[str, tuple[str, ...]] = {
    "tickets": (
        "been in touch",
        "has she been in touch",
        "got in touch with us",
        "reached out to us",
        "contacted support",
        "called us",
        "rang us",
        "phoned us",
        "emailed us",
        "chased us",
        "have they chased us",
        "raised a query",
        "any open cases",
        "did they complain",
        "logged a problem",
        "spoken to customer service",
        "any correspondence",
        "any messages from them",
        "have they written in",
        "history of contact",
        "any issues reported",
        "did anyone report",
        "has anyone moaned about",
        "what have people said about",
        "is anyone unhappy about",
        "has she raised anything with us",
        "any previous run-ins",
        "keeps emailing us",
    ),
    "invoices": (
        "outstanding balance",
        "what do they owe",
        "how much do they owe",
        "unpaid bills",
        "amount due",
        "what have they been charged",
        "payment history",
        "any money owed",
        "bills",
        "receipts",
        "what's owed on the account",
        "are they in arrears",
        "have they settled up",
        "statement of account",
        "what's on their tab",
    ),
    "refund": (
        "goodwill gesture",
        "make it right",
        "compensate them",
        "knock some money off",
        "send them some money back",
        "is there anything we owe them",
        "return their money",
        "put some money back on their card",
        "a discount for the trouble",
        "sort them out with some cash",
        "smooth things over",
        "sweeten things for them",
        "a goodwill payment",
        "their cash back",
    ),
    "policies": (
        "send something back",
        "how long do they have to return it",
        "return window",
        "what are the rules",
        "are we allowed to",
        "terms and conditions",
        "what is our stance",
        "what's the process",
        "the guidance on",
        "can they send it back",
        "swap it for another",
        "cancel an order",
        "what's the procedure",
        "how long is the guarantee",
        "what cover do they have",
    ),
    "orders": (
        "did it ship",
        "has it been dispatched",
        "did my orders go out",
        "where is my stuff",
        "purchase history",
        "has it arrived",
        "was it delivered",
        "what's in transit for them",
    ),
    "customer": (
        "which account is it",
        "what tier are they",
        "when did they join",
        "their profile",
        "where are they based",
        "are they a vip",
        "who are we dealing with",
    ),
}

# What a matched phrasing is about, as words a policy search finds.
EXAMPLE_TOPICS: dict[str, tuple[str, ...]] = {
    "send something back": ("return",), "how long do they have to return it": ("return",),
    "can they send it back": ("return",), "return window": ("return",), "swap it for another": ("exchange",),
    "how long is the guarantee": ("warranty",), "what cover do they have": ("warranty",),
}  # fmt: skip

# "Has the refund come through / been paid / gone out?", "was he ever refunded?", "was he charged?":
# whether money moved is in billing's invoices (paid and refunded amounts), not in a policy, and not
# a question of whether a refund would be allowed. Such a question is answered from the invoices
# (and the customer's orders, to tell which was sent back), never complete without them.
REFUND_PAID = re.compile(
    r"\b(?:refund|refunds|money|it|that|payment)\b[^.?!]{0,40}?\b(?:gone through|went through|come through|"
    r"came through|been paid|paid out|gone out|went out|been processed|been issued|gone back|paid yet)\b"
    r"|\b(?:ever|been|actually|already|they|he|she) (?:been )?refunded\b"
    r"|\brefund (?:paid|processed|issued|sent)\b"
    r"|\bwas (?:s?he|they|it) (?:ever |actually )?(?:charged|refunded)\b"
    r"|\b(?:was|were|been|got) charged for\b"
)

# Support shorthand, read as the word it stands for before typos are corrected ("any open tix?").
SHORTHAND: dict[str, str] = {
    "tix": "tickets", "tkt": "ticket", "tkts": "tickets", "tckt": "ticket", "tckts": "tickets",
    "ords": "orders", "ordrs": "orders", "invs": "invoices", "inv": "invoice", "chk": "check",
    "nvr": "never", "evr": "ever", "mgr": "manager", "acct": "account", "acc": "account", "pkg": "package",
    "msg": "message", "msgs": "messages", "dupe": "duplicate", "refnd": "refund", "rfnd": "refund",
    "pmt": "payment", "pymt": "payment", "cust": "customer", "b4": "before",
}  # fmt: skip

# --- money and counts in words ----------------------------------------------------------------------

# Money people name by a word: "a tenner", "two fivers", "half a grand".
MONEY_WORDS: dict[str, float] = {
    "fiver": 5, "fivers": 5, "tenner": 10, "tenners": 10, "score": 20, "pony": 25, "ponies": 25,
    "ton": 100, "monkey": 500, "grand": 1000,
}  # fmt: skip

# A refund of what was paid, with no amount written: the order is looked up and its total checked.
FULL_AMOUNT_PHRASES = (
    "in full", "full refund", "full amount", "full price", "whole order", "whole amount", "whole thing",
    "everything they paid", "everything she paid", "everything he paid", "all of it back", "all their money",
    "all her money", "all his money", "the lot back", "what they paid", "what she paid", "what he paid",
    "entire order", "entire amount", "complete refund", "100%",
)  # fmt: skip

# Counts of links in words ("two hops out", "3 links away", "depth 2"): the unit words, read as a count
# for an argument whose schema says it counts links (``sources.formats.LINKS_DESCRIPTION``).
LINK_UNITS = words_of("hop hops link links level levels step steps jump jumps deep")

# --- the structure of a clause: what asks, what tells a story, what is only courtesy -------------------

# Words that open a question.
QUESTION_WORDS = words_of(
    "what what's whats who who's whos whose which when where why how how's is are was were do does did "
    "can could would will should shall may might has have had any anything"
)
# Words that ask, wherever they stand: "pls", "can you", "I need", "let me know".
REQUEST_WORDS = words_of(
    "please pls plz kindly need needs want wants like wondering wonder tell show check find give get list pull "
    "look confirm investigate research summarise summarize see lookup review verify refund reimburse "
    "search fetch grab send chase compare explain advise assess"
)
# Words that open a story: who it happened to.
STORY_OPENERS = words_of(
    "i i've i'm i'd i'll we we've we're we'd me she she's he he's they they've they're it it's there"
)
# Past forms that are not "-ed" (a story is told in the past): grammar, not topic.
IRREGULAR_PAST = words_of(
    "was were had did came went got gave took sent said told broke bought made left lost found fell "
    "thought knew saw ran rang paid put set sold brought caught kept meant met spent stood understood "
    "wrote drove flew grew hung held hurt led lit read rode rose shook shut sang sat slept spoke "
    "stole stuck swore threw tore wore woke won gone been done seen taken given written broken "
    "chosen driven eaten fallen forgotten frozen hidden ridden risen shaken spoken stolen sworn torn worn"
)
# Words that frame or qualify an ask without asking anything a source answers differently ("ticket
# history", "details for", "charged twice", "especially ORD-10031"): general English, not topics.
LIGHT_WORDS = words_of(
    "history details detail record records twice once yet else especially particularly mainly only even "
    "news update updates info everything anything stuff bits thing things case cases say says said "
    "tell told ask asked mention mentioned exactly actually really definitely probably maybe either "
    "whether anyone someone somebody people person folks mistake error sure behind whoever whatever "
    "agent pasted inbox forwarded fwd within neighbours neighbors "
    "connect connects reachable deep away lately nearly almost nothin nuthin true correct "
    # contractions typed without their apostrophe
    "shes hes isnt arent wasnt werent dont doesnt didnt cant couldnt wont wouldnt hasnt havent hadnt "
    "shouldnt theyre youre ive weve theyve youve ill itll thats "
    "currently already soon far"
)
# Words that close a letter: what a pasted email says before them is the customer's story.
SIGN_OFF_WORDS = words_of("regards thanks thank cheers best sincerely faithfully yours love wishes")
# Verbs that ask for something to be done, not found out: research reads the sources and acts on
# nothing, so a clause they open is listed as not researched ("reset his password", "send out a
# replacement jug"). "send" alone delivers what was found ("send me her invoices").
ACTION_VERBS = words_of(
    "reset delete erase remove cancel change update amend edit ship dispatch replace reissue resend "
    "approve block unblock unlock suspend close reopen escalate assign merge upgrade downgrade "
    "email text ring phone call notify apply waive decide think judge sign honour honor authorise authorize"
)
# Greetings, sign-offs and courtesy: context, never an ask.
COURTESY_WORDS = words_of(
    "hi hello hey dear sir madam team folks all guys morning afternoon evening regards kind best "
    "wishes cheers thanks thank thx ta sincerely faithfully yours warm many advance appreciated "
    "appreciate hope well sorry apologies fyi note heads ok okay cool great lovely love"
)

# --- writes: what asks for one (coordinator.planning.writes) ------------------------------------------

# Research reads; a write is made only where the question asks for it, by a request to act. These say
# what such a request is made of. Words are compared as read (typos corrected); phrases as written.

# Verbs that ask for a refund by themselves, opening a clause: "refund £45 on ORD-10031", "reimburse her".
REFUND_VERBS = words_of("refund reimburse repay")
# Verbs that ask for one with a refund noun after them: "issue a £20 refund", "process a refund of £45",
# "put through a refund", "go ahead with the refund".
REFUND_DOING_VERBS = words_of(
    "issue process make do action raise apply send give initiate execute perform trigger submit complete "
    "arrange authorise authorize approve put push sort book go proceed"
)
# The nouns of a refund after such a verb.
REFUND_NOUNS = words_of("refund refunds reimbursement repayment")
# What may stand between such a verb and its noun ("issue her a full refund", "make the customer a refund").
REFUND_NOUN_LEAD = words_of(
    "a an the this that her his their them him it customer full partial goodwill small quick one same or and"
)
# The particles a doing verb may take before them ("go ahead with the refund", "put through a refund").
REFUND_PARTICLES: dict[str, frozenset[str]] = {
    "go": words_of("ahead with"), "proceed": words_of("with"), "put": words_of("through"),
    "push": words_of("through"), "sort": words_of("out"),
}  # fmt: skip
# A refund noun before one of these names something about a refund, not one asked for ("the refund
# policy", "refund status"); so does the word "refund" before a function word ("refund of £45 on ...",
# "refund is due"): a noun, not the verb.
REFUND_COMPOUNDS = words_of(
    "policy policies status eligibility history window limit limits rule rules details detail info "
    "information process procedure procedures options option form request requests record records ledger "
    "total totals amount amounts terms guidance check checks question questions query queries enquiry "
    "issue issues problem problems reason reasons pending due owed issued processed approved denied declined "
    "rejected received failed outstanding"
)
NOUN_AFTER = words_of("of for on to from is was has had will would should could can may might must")
# "pay (her) back £45": these verbs and "back" ask for a refund; "give", "send", "hand", "put" ... back ask
# for one only of money ("give her the money back", "give her £45 back"; "send the jug back" returns it).
PAY_BACK_VERBS = words_of("pay repay")
MONEY_BACK_VERBS = words_of("give send hand put")
CASH_WORDS = words_of("money cash funds")
# What may open a request before its verb, as written ("please refund", "can you refund", "go ahead and
# refund"). Those addressed to the assistant ("can you") ask even as a question; a please word asks too.
REQUEST_LEAD_INS: tuple[str, ...] = (
    "please", "pls", "plz", "kindly", "just", "now", "ok", "okay", "right", "so", "then", "also", "and",
    "go ahead and", "go on and",
)  # fmt: skip
ADDRESSED_LEAD_INS: tuple[str, ...] = (
    "can you", "could you", "would you", "will you", "can u", "could u", "would u", "will u",
    "i'd like you to", "i would like you to", "i need you to", "i want you to", "we need you to",
    "we'd like you to", "we want you to", "let's", "lets", "let us", "you can", "you may", "you should",
)  # fmt: skip
PLEASE_WORDS = words_of("please pls plz kindly")
# Verbs that ask for a named tool to be run: "run append_line with hello", "use the wipe tool".
RUN_VERBS = words_of("run call use invoke execute trigger fire")
# Words that make a mention not a request: negated ("not ORD-10134", "never"), excluded ("except"),
# contrasted ("unlike", "rather than", "instead of"). A phrase is matched on the words as written ("don"
# of "don’t" typed with a curly apostrophe, which the reader cuts).
NEGATION_WORDS = words_of(
    "not never no nor don't dont doesn't isn't aren't won't shouldn't mustn't except excluding excl unlike "
    "neither don doesn isn aren won shouldn mustn ignore disregard skip exclude leave"
)
CONTRAST_PHRASES: tuple[str, ...] = (
    "other than", "rather than", "instead of", "apart from", "aside from", "as opposed to", "in place of",
    "let alone", "but not",
)  # fmt: skip
# What makes the rest of a clause a condition ("refund it if eligible"); only one the eligibility check
# decides is honoured (below). "unless" never is.
CONDITION_MARKERS: tuple[str, ...] = (
    "if", "unless", "provided", "providing", "assuming", "as long as", "so long as", "only if", "in case",
    "subject to",
)  # fmt: skip
# The words of a condition the plan's eligibility check decides ("if eligible", "if the policy allows",
# "if it's within the window"), and of a question that only asks that of a request before it
# ("refund £45 on ORD-10031, is that ok?").
ELIGIBILITY_WORDS = words_of(
    "eligible eligibility allowed allow allows permitted permit permits possible qualifies qualify "
    "qualified policy policies rules rule ok okay fine valid entitled within window limit limits terms "
    "able allowable acceptable approved appropriate applicable correct right refund refunds refunded "
    "refundable order customer amount full still alright work works"
)
# Words that point back to something named before them ("refund it", "that order").
ANAPHORS = words_of("it that this them those these same one order")
# Verbs that say a clause reports what someone said, not a request ("she said: refund it").
REPORTING_WORDS = words_of(
    "said says asked asks wrote writes told tells wants wanted requested requests demanded demands "
    "insisted insists replied emailed messaged texted mentioned quote quoted"
)
# What takes back what was said just before it ("..., no, don't", "never mind", "scratch that"): a clause
# of these words alone, one of the second list among them ("don't wait" takes nothing back).
RETRACTION_WORDS = words_of(
    "no not don't dont never mind scratch cancel forget ignore actually sorry that it this hold off stop do "
    "please oh on"
)
RETRACTING = words_of("no not don't dont never scratch cancel forget ignore stop")
