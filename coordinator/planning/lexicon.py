"""The planner's vocabulary, as data: every word and phrase it reads, grouped by what each is for.

A maintainer adding a phrasing finds its place here: the words that ask each intent (which tools
answer an intent is ``coordinator.planning.intents``), the topic words a search takes, the words of a
clause's structure (what asks, what tells a story, what is courtesy), money and counts in words, and
what asks for a write. The passes that read them (``coordinator.planning.planner`` lists the passes)
import them from here; no other module of the planner holds a list of words.

Words are single lower-case tokens, matched after typo correction; phrases are matched as written
(lower case, single spaces) and may span words that mean something else alone ("give back").
"""

from __future__ import annotations

import re

from sources.products import PRODUCTS

# What a word is, for every pass that cuts text into words: letters, with an apostrophe inside
# ("she's", "don't"). One pattern, so the reader, the clauses, the writes and the matcher agree.
TOKEN = re.compile(r"[a-z]+(?:'[a-z]+)?")


def words_of(text: str) -> frozenset[str]:
    """The words of a space-separated list (the data below reads as prose, not as quoted lists)."""
    return frozenset(text.split())


# --- the words that ask each intent (coordinator.planning.intents binds each intent to its tools) ------

# Words that ask for a policy without saying which: they choose the source, not the search text.
GENERIC_WORDS = words_of(
    "policy policies rule rules allowed allow qualify qualifies eligible eligibility guideline guidelines "
    "procedure process entitled"
)

# Each intent's words: one of them in a clause asks it.
INTENT_WORDS: dict[str, frozenset[str]] = {
    "customer": words_of("profile"),
    "orders": words_of(
        "order orders ordered purchase purchases purchased bought buy buys buying deliveries "
        "shipments shipment shop shops shopped shopping"
    ),
    "tickets": words_of(
        "ticket tickets complaint complaints complain complained issues contacted chasing chased"
    ),
    "invoices": words_of(
        "invoice invoices invoiced billing billed payment payments paid charged charges charge"
    ),
    "refund": words_of(
        "refund refunds refunded refundable refunding reimburse reimbursed reimbursement compensation compensate "
        "repay repaid repayment "
        "goodwill"
    ),
    # the generic words choose policies; the rest are also what a policy search looks for
    "policies": GENERIC_WORDS
    | words_of(
        "warranty guarantee returns return gdpr erasure escalation escalate shipping article articles kb"
    ),
    "everything": words_of("everything overview"),
}

# Nouns that ask an intent only where its tools have something to take ("the customer of ORD-10023"
# asks who; "the customer wants a refund" does not): never reported as unanswered. "customer" and
# "account" alone are nouns in most questions ("the customer is furious"). "did they pay": asks of
# invoices where there is someone's to list, not in "pay £20 back".
INTENT_WEAK_WORDS: dict[str, frozenset[str]] = {
    "customer": words_of("customer customers account accounts contact owner buyer purchaser"),
    "invoices": words_of("pay pays paying"),
}

# Each intent's phrases, matched as written: asking *who* someone is takes one of the customer's.
INTENT_PHRASES: dict[str, tuple[str, ...]] = {
    "customer": (
        "who is", "who's", "whos", "who placed", "who ordered", "who bought", "whose order", "which customer",
        "customer details", "contact details", "account details", "customer info", "look up", "lookup",
        "sign up", "signed up", "joined us", "become a customer", "became a customer",
    ),
    "orders": (
        "turn up", "turned up", "show up", "shown up",
        # what someone has had from the shop is what they ordered ("what's she had from us?"; "off us"
        # would make "off" a known word, and "money off" is read by meaning)
        *(f"{verb} from {whom}" for verb in ("had", "got") for whom in ("us", "you")),
    ),
    "tickets": (
        "contacted us", "raised an issue", "support case", "support cases", "support request",
        "support requests", "been on to us", "been onto us", "been in touch", "got in touch",
        "in contact with us", "been in contact", "got in contact", "get in contact", "what's been said",
        # a case is a ticket where it is opened, open, logged or raised ("any open cases for her?")
        "open case", "open cases", "case open", "cases open", "opened a case", "raised a case", "case raised",
        "cases raised",
    ),
    "refund": (
        "money back", "give back", "give them back", "give her back", "give him back", "pay back",
        "paid back", "get back", "back for", "cash back", "money returned",
    ),
    "policies": ("what do we do", "how do we handle", "how should we"),
    "everything": (
        "all about", "full picture", "all we have", "whatever we have", "everything we have", "anything on",
        "all you have", "the lot", "whole history", "full history",
    ),
}  # fmt: skip

# "send it back", "post the cafetiere back": a thing returned, whatever stands between the verb and
# its particle; a search for it uses the word "return".
RETURN_VERBS = ("send", "post", "ship", "bring", "take", "mail", "courier")
# The policy words that also name a thing sent back ("the money for his return").
RETURN_NOUNS = frozenset({"return", "returns"})

# --- topics: what a search looks for ------------------------------------------------------------

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

# --- function words: never a topic, never an ask by themselves -------------------------------------

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
    "made make when where whose has been thing things older linked related connected links link "
    "tha ones"
)

# First names that are also everyday English words: never read as a person in a query.
NOT_NAMES = words_of(
    "will may june april august mark bill grant faith hope rose jack guy joy ray summer dawn chase drew "
    "hunter page art case lane king amber crystal sterling destiny star sunny iris ruby jade ivy autumn "
    "harry rich price van miles reed wade gene angel carol major paris jordan sky order"
)


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
# A dot followed by a letter is inside an email or a name ("jane.doe@example.com"), not a sentence's end.
REFUND_PAID = re.compile(
    r"\b(?:refund|refunds|refnd|rfnd|money|it|that|payment)\b(?:[^.?!]|\.(?=\w)){0,40}?"
    r"\b(?:(?:gone|went|come|came) (?:through|thru)|"
    r"been paid|paid out|gone out|went out|been processed|been issued|gone back|paid yet)\b"
    # "did the money ever go back to the customer?", "did his refund ... go back on his card?"
    r"|\b(?:did|has|have)\b[^.?!]{0,40}?\b(?:money|refund|refnd|payment)\b[^.?!]{0,40}?"
    r"\b(?:go|gone|went) (?:back|through|thru)(?: (?:on|to|into) (?:his|her|their|the|my) (?:card|account|bank))?\b"
    # "the money of his return, it is arrived on his account?"
    r"|\b(?:money|refund|payment)\b(?:[^.?!\n]|\.(?=\w)){0,60}?\b(?:arrived|landed|reached|hit|shown up|showed up)\b"
    r"[^.?!]{0,20}?\b(?:account|card|bank)\b"
    r"|\b(?:took|taken|take) (?:the |his |her |their |my )?(?:money|payment)\b"
    r"|\b(?:it|that|he|she|they) (?:was|were|has been|have been|had been) refunded\b"
    r"|\b(?:ever|been|actually|already|they|he|she) (?:been )?refunded\b"
    r"|\brefund (?:paid|processed|issued|sent)\b"
    r"|\bwas (?:s?he|they|it) (?:ever |actually )?(?:charged|refunded)\b"
    r"|\b(?:was|were|been|got) charged for\b"
    # "did we pay # back?", "have we refunded her?": whether we did is in the invoices
    r"|\b(?:did|have|has) we (?:ever |actually |already )?(?:pay|paid|refund|refunded|reimburse|reimbursed)"
    r" (?:#|him|her|them|the customer)(?!\w)"
    # "has she got her refund?", "did he (or #, a customer named) receive his money back?", not "can
    # she get her money back?"
    r"|\b(?:got|received|had|did (?:s?he|they|you|i|we|#) (?:ever |actually )?(?:get|receive))"
    r" (?:her|his|their|the|my|your|our) (?:refund|money back)\b"
    # "has the £45 been paid back to her yet?": an amount (read as "£", ``planner._said_plainly``) as the
    # money that moved back; "£76 still went out" is a charge, not a refund paid
    r"|(?:^|\s)£ (?:[^.?!]{0,20}?\b)?(?:been (?:paid|refunded|returned)|(?:gone|come|went|came) (?:back|through|thru))\b"
)

# Support shorthand, read as the word it stands for before typos are corrected ("any open tix?").
SHORTHAND: dict[str, str] = {
    "tix": "tickets", "tkt": "ticket", "tkts": "tickets", "tckt": "ticket", "tckts": "tickets", "tck": "ticket",
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
    "entire order", "entire amount", "complete refund", "100%", "whole lot", "all of it", "full total",
    "full sum", "total amount",
)  # fmt: skip
# Words that ask the whole of an order a later round finds ("the whole £750", "refund the lot"): read by
# the rounds only, where "the lot" is not "everything about her" (an intent phrase).
WHOLE_OF_AN_ORDER = ("whole", "entire", "the lot")
# The parts of an amount people ask back ("half", "a third of it", "two thirds"), as a share of it.
SHARE_WORDS: dict[str, float] = {
    "half": 1 / 2, "third": 1 / 3, "two third": 2 / 3, "quarter": 1 / 4, "three quarter": 3 / 4,
}  # fmt: skip
# What a bare number after it is an amount in pounds ("refund 45 on ORD-10031", "refund twelve fifty").
REFUND_AMOUNT_LEAD_INS = ("refund", "reimburse", "money back", "pay back", "give back", "compensation")

# Counts of links in words ("two hops out", "3 links away", "depth 2"): the unit words, read as a count
# for an argument whose schema says it counts links (``sources.formats.LINKS_DESCRIPTION``).
LINK_UNITS = words_of("hop hops link links level levels step steps jump jumps deep")
# The articles linked to the one a policy search finds ("the returns policy and whatever it points
# to", "the articles linked to it"): the next round follows the links of the search's best match.
ARTICLE_LINKS = re.compile(
    r"\b(?:linked|related|connected|links?|points?|pointing|refers?|referring) (?:to|from|with) (?:it|that|this)\b"
    r"|\b(?:it|that|this) (?:points|links|refers) to\b"
)

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
    "search fetch grab send chase compare explain advise assess provide"
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
    "whether anyone someone somebody people person folks mistake error sure behind whoever whatever owns "
    "agent pasted inbox forwarded fwd within neighbours neighbors "
    "connect connects reachable deep away lately nearly almost nothin nuthin true correct "
    "containing contains contain problem problems "
    # the parts of an amount ("half", "a third of it", "the whole": read by the rounds), "at least", "asking for"
    "half halves third thirds quarter quarters least whole entire asking "
    # contractions typed without their apostrophe
    "shes hes isnt arent wasnt werent dont doesnt didnt cant couldnt wont wouldnt hasnt havent hadnt "
    "shouldnt theyre youre ive weve theyve youve ill itll thats "
    "currently already soon far "
    # hedges: what someone believes frames what they say ("I think you still took the money")
    "think thinks reckon reckons believe believes suppose supposes suspect suspects guess "
    # "will it go through?": where a refund or an amount is asked, whether it would be allowed
    "through thru"
)
# When, said emphatically ("where is it right now?"): no ask, and "right" here is not "make it right".
TIME_FILLERS = re.compile(r"\bright (?:now|away|this minute|at this moment)\b|\bas we speak\b")
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
    "let alone", "but not", "never mind", "leave aside", "leaving aside", "leave out", "leaving out",
    "not counting", "not including",
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

# --- clauses: what joins, opens and frames them (coordinator.planning.spans) ---------------------------

# Words before a noun that make it the thing asked for ("the tracking number", "her phone").
DETERMINERS = frozenset({"the", "their", "her", "his", "its", "my", "your", "our", "a", "an", "any"})
# Who a support agent speaks of: a clause that is only one of them and how they feel tells.
PEOPLE = frozenset({"customer", "cx", "client", "caller", "she", "he", "they", "she's", "he's", "they're"})
# What may stand between that person and their mood ("pls, she's really upset").
MOOD_FILLERS = frozenset({"please", "pls", "plz", "kindly", "is", "are", "very", "really", "so", "getting"})
# The words of a joint that are more than one ("as well as", "along with", "not to mention").
JOINT_PARTS = frozenset({"as", "well", "along", "with", "together", "not", "to", "mention"})
# Greetings that open a pasted letter.
GREETINGS = frozenset({"hi", "hello", "hey", "dear", "hiya", "morning", "afternoon", "evening"})
# Words that join two asks ("orders and tickets").
JOINTS = frozenset({"and", "but", "also", "plus", "then", "btw", "so"})
# Words that go on from a thing named within one clause ("ORD-10031 for 45 quid", "jane's orders").
JOINING = frozenset({"for", "on", "of", "to", "from", "with", "in", "at", "by", "s", "or", "vs", "x"})
# Words that make what follows someone's ("her delivery address").
POSSESSIVES = frozenset({"her", "his", "their", "its", "my", "your", "our"})
# Words that ask what a thing is ("what's her phone number").
WHAT_WORDS = frozenset({"what", "what's", "whats", "which"})

# --- accounting: words that say what an action is done to (coordinator.planning.accounting) ------------

# What may follow an action verb before its object ("reset her password", "cancel whether ...").
ACTION_OBJECTS = frozenset(
    {"the", "a", "an", "his", "her", "their", "my", "our", "your", "its", "him", "them", "it", "out"}
    | {"whether", "if", "off", "that"}
)
# Words that say what something is about ("re: the kettle", "regarding her order").
ABOUT_WORDS = frozenset({"about", "re", "regarding", "concerning", "touching", "mentioning", "wrt"})

# --- what names a record: the nouns of the things the sources hold (coordinator.planning.reading) ------

# What may stand between a negation and what it leaves out ("not about order ORD-10134", "except for").
RECORD_NOUNS = frozenset({"order", "orders", "customer", "customers", "account", "email", "sku", "article"})
# The kinds of record an id's prefix may name, read through SHORTHAND ("TCK-12" is a ticket's): after
# one of these a number of one or two digits makes an id too ("REFUND-77", "case-5"), where after
# any other word it does not ("COVID-19", "top-10", "Windows-11"). Orders, customers, products and
# articles are not here: their own readers say which of their numbers are ids. Each is at most ten
# letters, an id's longest prefix (``reading._ID_SHAPE``).
ID_KIND_WORDS = words_of(
    "ticket case incident complaint claim request invoice bill payment charge refund credit return rma "
    "shipment delivery"
)
# The words for one order ("my order", "the shipment"): with an order named, that order is meant.
ONE_ORDER = frozenset({"order", "purchase", "shipment"})
# "Who placed ORD-10412, and what else have they ordered?", "any other open tickets that customer has",
# "whoever owns ORD-10098: their newest order":
# with an order named and no customer, the customer who placed it is whom the orders or tickets asked
# are of (their search takes the order's customer_id), not the order itself.
THEIR_OTHER = re.compile(
    r"\bwhat else\b|\belse (?:have|has|did|do|does) (?:they|he|she|that customer|the customer)\b"
    r"|\b(?:any|their|his|her|all)? ?other (?:open |closed |recent )?(?:orders|tickets|purchases)\b"
    r"|\b(?:their|his|her) (?:newest|latest|most recent|last|recent) (?:orders?|purchases?)\b"
)

# "never arrived", "they still haven't turned up", "still waiting on it": a complaint that an order did
# not come, which the order's tickets answer (what support was told, what they did).
NOT_ARRIVED = re.compile(
    r"\b(?:never|not|hasn['’]?t|haven['’]?t|didn['’]?t|not yet|still not)\s+(?:yet\s+)?"
    r"(?:arrived?|turn(?:ed)? up|show(?:n|ed)? up|received?|been delivered|got here|come|came)\b"
    r"|\bstill waiting\b"
)

# --- numbers in words (coordinator.planning.reading, coordinator.planning.rounds) --------------------

# Counts as written in a sentence ("the last two weeks", "three hops out").
COUNT_WORDS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
               "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14,
               "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20,
               "thirty": 30, "sixty": 60, "ninety": 90}  # fmt: skip
# The words an amount in words is made of: "fifty quid", "twenty-five pounds", "four ninety-nine".
NUMBER_WORDS = (
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
    "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty",
    "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety", "hundred", "thousand",
)  # fmt: skip

# --- writes: what is not a request (coordinator.planning.writes) --------------------------------------

# Words of wanting: "she wants a refund" reports, it does not ask for one by itself.
WANTING_WORDS = words_of("need needs want wants like")
# Words before a refund verb that make it no request ("if we can refund it", "to refund").
NOT_BEFORE_A_VERB = frozenset(
    {"to", "can", "could", "would", "should", "will", "may", "might", "must", "we", "i", "you", "they", "she",
     "he", "be", "cannot", "can't", "not", "never", "don't", "dont"}
)  # fmt: skip
# Words that open a relative clause ("the order which she returned").
RELATIVE_WORDS = frozenset({"which", "who", "whom", "whose", "that"})

# --- accounting and rounds: what opens an action, what names any item ---------------------------------

# What may open a clause before its action verb ("can you reset her password", "we need to cancel it").
ACTION_OPENERS = words_of("please pls plz kindly can could would you u we just do need to should i")
# Words for an item in general, not one product: they do not pick an order by what it holds.
ANY_ITEM_WORDS = words_of("item items product products parcel package appliance appliances")
